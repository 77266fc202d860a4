"""kgen's profiler: why a kernel is as fast as it is.

- ncu.py: runs a candidate under Nsight Compute (`profile_candidate`) and parses
  its CSV output (`parse_raw_csv`, `parse_details_csv`);
- ncu_child.py: the program profiled (one warm forward call in the NVTX range "kgen");
- diagnose.py: counters -> `Diagnosis` (bound, top stalls with fixes, occupancy, ...);
- fallback.py: the same without ncu, from the torch profiler, Triton's compile
  metadata and the SASS;
- roofline.py: intensity, roof, % of speed-of-light (peaks and work: verifier/physics.py);
- records.py: KernelMetrics, Stall, Rule, Occupancy, Roofline, Diagnosis.

    python -m profiler.ncu RAW.csv [DETAILS.csv]     # diagnose captured ncu output
"""
