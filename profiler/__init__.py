"""kgen's profiler: why a kernel is as fast as it is.

- profile.py: `profile_candidate(task, source)`: ncu where it can read the counters, else the fallback;
- ncu.py: Nsight Compute's metrics, command lines and the parsing of its CSV output
  (`parse_raw_csv`, `parse_details_csv`);
- child.py: the profiled child process as the parent sees it: its job file, running it sandboxed, its report;
- ncu_child.py: the program profiled (one warm forward call in the NVTX range "kgen");
- diagnose.py: counters -> `Diagnosis` (bound, top stalls with fixes, occupancy, ...);
- fallback.py: the same without ncu, from the torch profiler, Triton's compile
  metadata and the SASS;
- roofline.py: intensity, roof, % of speed-of-light (peaks and work: verifier/physics.py);
- records.py: KernelMetrics, Stall, Rule, Occupancy, Roofline, Diagnosis.

Imports point one way: profile → ncu, fallback → child → verifier.sandbox; diagnose, roofline → records.

    python -m profiler.ncu RAW.csv [DETAILS.csv]     # diagnose captured ncu output
"""
