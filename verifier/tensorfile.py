"""Tensors as files between the judge and the candidate process: a JSON header, then raw bytes.

    from verifier import tensorfile
    tensorfile.write(path, tensor)                       # any device; written contiguous, from host memory
    tensorfile.write_fresh(path, b"...")                 # any file the judge puts where the candidate writes too
    t = tensorfile.read(path, max_bytes=1 << 30)         # a CPU tensor; TensorFileError when malformed

    staging = tensorfile.Staging()                       # one host buffer, reused, page-locked where CUDA is up
    tensorfile.write(path, tensor, staging)              # the device-to-host copy lands in it
    t = tensorfile.read(path, 1 << 30, staging)          # a view of it: copy it before the next use
    staging.release()

Format (one file, one tensor):
    8 bytes   MAGIC b"KGENT001"
    8 bytes   header length, unsigned little-endian
    header    UTF-8 JSON, exactly {"dtype": "float32", "shape": [...], "strides": [...], "nbytes": N}
              with strides the contiguous ones for shape (elements, not bytes)
    N bytes   the tensor's elements, row-major, the machine's byte order

The reader trusts nothing it reads: the file is opened without following a
symbolic link and must be a regular file; the header must be small, well-formed
JSON with exactly those keys; the dtype must be one of DTYPES; shape and strides
must be lists of non-negative ints with strides contiguous; nbytes must equal
numel * itemsize, be at most max_bytes, and be exactly what is left in the file.
The elements are read into a fresh buffer (or the caller's Staging) and viewed as the dtype: no
pickle, no torch.load, nothing in the file is ever executed.

Staging: a large output crosses as many as thirteen times a verification, and a fresh host buffer a time
costs its page faults, and pageable memory makes CUDA copy through bounce buffers: a 512 MiB output took
about a second a call on the H200 that way. A Staging buffer is allocated once at the largest size seen,
registered with CUDA (cudaHostRegister, exact size) where CUDA is initialised in the process, and reused;
a failed registration leaves it pageable, which is slower and as correct.

Large files: the host side of a hand-over is memory copies, and one thread's copy into or out of /dev/shm
is slow (on the H200's host, 6 GiB: 2.8 s written, 1.9 s read, against 0.12 s for each device copy;
benchmarks/verifier.md). A file of PARALLEL_MIN_BYTES or more is written through a shared mapping of it
by up to PARALLEL_THREADS threads (pwrite from several threads is serialised by the file's lock), and read
by as many threads, each its own range with preadv. The reader still never maps the other side's file:
a file that shrinks while it is read ends early (TensorFileError), it cannot fault the reader.
"""

from __future__ import annotations

import contextlib
import json
import math
import mmap
import os
import secrets
import stat
import struct
import threading

import torch

MAGIC = b"KGENT001"
MAX_HEADER_BYTES = 4096
MAX_DIMS = 16
DTYPES = {
    "float64": torch.float64, "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8,
    "bool": torch.bool, "complex64": torch.complex64, "complex128": torch.complex128,
}
_NAMES = {v: k for k, v in DTYPES.items()}
PARALLEL_MIN_BYTES = 64 << 20       # a file this large or larger is written and read by several threads
PARALLEL_THREADS = max(1, min(8, os.cpu_count() or 1))
_CHUNK_MIN_BYTES = 16 << 20         # no thread gets less than this


class TensorFileError(ValueError):
    """A tensor file that does not follow the format; the message says what is wrong with it."""


class TensorTooLarge(TensorFileError):
    """A well-formed tensor file holding more bytes than the reader allows."""


def contiguous_strides(shape: list[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return list(reversed(strides))


def dtype_name(dtype: torch.dtype) -> str:
    """The format's name for dtype; TensorFileError for a dtype the format does not carry."""
    if dtype not in _NAMES:
        raise TensorFileError(f"dtype {dtype} cannot be sent as a tensor file")
    return _NAMES[dtype]


def header_for(t: torch.Tensor) -> dict:
    shape = [int(s) for s in t.shape]
    return {"dtype": dtype_name(t.dtype), "shape": shape, "strides": contiguous_strides(shape),
            "nbytes": t.numel() * t.element_size()}


class Staging:
    """One host buffer that every tensor file a process writes or reads passes through (module docstring)."""

    def __init__(self) -> None:
        self._buf: torch.Tensor | None = None
        self.pinned = False

    def take(self, nbytes: int) -> torch.Tensor:
        """The first nbytes of the buffer (uint8), grown to nbytes when smaller; its contents are left as they were."""
        if self._buf is None or self._buf.numel() < nbytes:
            self.release()
            self._buf = torch.empty(max(nbytes, 1), dtype=torch.uint8)
            self.pinned = _register(self._buf)
        return self._buf[:nbytes]

    def release(self) -> None:
        if self._buf is not None and self.pinned:
            with contextlib.suppress(Exception):
                torch.cuda.cudart().cudaHostUnregister(self._buf.data_ptr())
        self._buf, self.pinned = None, False


def _register(buf: torch.Tensor) -> bool:
    """Page-lock buf for CUDA's copies, where this process has CUDA up already (never initialised for it)."""
    try:
        if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
            return False
        return int(torch.cuda.cudart().cudaHostRegister(buf.data_ptr(), buf.numel(), 0)) == 0
    except Exception:  # noqa: BLE001 - pageable memory works, only slower
        return False


def write(path: str | os.PathLike, t: torch.Tensor, staging: Staging | None = None) -> int:
    """Write t (any device, any strides) to path, replacing what was there; returns the bytes written.

    staging: the host buffer the elements are copied into on their way (reused); None: a fresh one. A
    contiguous CPU tensor is written from its own memory either way."""
    header = header_for(t)
    text = json.dumps(header).encode()
    nbytes = header["nbytes"]
    if nbytes and staging is not None and not (t.device.type == "cpu" and t.is_contiguous()):
        host = staging.take(nbytes)
        # NOTE: a uint8 buffer viewed as t's dtype and shape: the copy reads any strides, from any device
        host.view(t.dtype).reshape(t.shape).copy_(t.detach())
    elif nbytes:
        host = t.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8)
    # NOTE: the raw bytes, so every dtype (bfloat16 too) leaves as it is
    raw = memoryview(host.numpy()).cast("B") if nbytes else b""
    head = MAGIC + struct.pack("<Q", len(text)) + text
    if nbytes >= PARALLEL_MIN_BYTES and _ranges(nbytes)[1:]:
        _write_mapped(path, head, raw)
    else:
        write_fresh(path, [head, raw])
    return len(text) + 16 + nbytes


def _ranges(nbytes: int) -> list[tuple[int, int]]:
    """[lo, hi) byte ranges of nbytes, one a thread: at most PARALLEL_THREADS, none under _CHUNK_MIN_BYTES."""
    parts = max(1, min(PARALLEL_THREADS, nbytes // _CHUNK_MIN_BYTES))
    step = -(-nbytes // parts)
    return [(lo, min(nbytes, lo + step)) for lo in range(0, nbytes, step)] or [(0, 0)]


def _in_threads(work, ranges) -> None:
    """work(lo, hi) for every range, each in a thread of its own (the first in this one); the first error raised."""
    errors: list[BaseException] = []

    def run(lo: int, hi: int) -> None:
        try:
            work(lo, hi)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=r, daemon=True) for r in ranges[1:]]
    for t in threads:
        t.start()
    run(*ranges[0])
    for t in threads:
        t.join()
    if errors:
        # NOTE: without its traceback: the frames would keep the copy's arrays, and with them a mapping, alive
        raise errors[0].with_traceback(None)


def _copier(dst, src):
    """work(lo, hi) for _in_threads: src[lo:hi] into dst[lo:hi] (numpy arrays); nothing kept after the last call."""
    import numpy as np

    def copy(lo: int, hi: int) -> None:
        np.copyto(dst[lo:hi], src[lo:hi])

    return copy


def _write_mapped(path: str | os.PathLike, head: bytes, raw: memoryview) -> None:
    """write_fresh's file, its elements copied in through a shared mapping by several threads.

    NOTE: the same fresh, unguessable file renamed into place as write_fresh's (never a link followed); the
    mapping is this process's own file, sized before it is mapped."""
    import numpy as np

    tmp = f"{os.fspath(path)}.{secrets.token_hex(8)}.part"
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        try:
            os.ftruncate(fd, len(head) + len(raw))
            os.pwrite(fd, head, 0)
            with mmap.mmap(fd, len(head) + len(raw), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as mm:
                # NOTE: numpy lets go of the GIL for a plain copy: the threads copy at once
                _in_threads(_copier(np.frombuffer(mm, dtype=np.uint8, offset=len(head)),
                                    np.frombuffer(raw, dtype=np.uint8)), _ranges(len(raw)))
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_text_nofollow(path: str | os.PathLike, max_bytes: int = 64 << 20) -> str:
    """The text of a regular file the candidate process may have written (or replaced by a link: OSError, never
    followed to a file of root's), at most max_bytes of it."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{os.fspath(path)} is not a regular file")
        return f.read(max_bytes).decode(errors="replace")


def write_fresh(path: str | os.PathLike, chunks) -> None:
    """Write the chunks (bytes-like) as the file at path, in a directory the candidate process can write too.

    NOTE: a fresh file of a name nobody can guess (O_CREAT | O_EXCL | O_NOFOLLOW), renamed into place: a link
    the candidate planted at path, or at any name of the form path + ".part", is replaced, never followed
    (followed, the judge, root, would have written wherever it pointed)."""
    tmp = f"{os.fspath(path)}.{secrets.token_hex(8)}.part"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in ([chunks] if isinstance(chunks, (bytes, str)) else chunks):
                f.write(chunk.encode() if isinstance(chunk, str) else chunk)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_header(fd: int, size: int) -> tuple[dict, int]:
    """(the validated header, where the elements start) from an open file of `size` bytes."""
    head = os.pread(fd, 16, 0)
    if len(head) < 16 or head[:8] != MAGIC:
        raise TensorFileError("not a kgen tensor file (no magic)")
    (length,) = struct.unpack("<Q", head[8:])
    if length > MAX_HEADER_BYTES or 16 + length > size:
        raise TensorFileError(f"header of {length} bytes is too long")
    try:
        header = json.loads(os.pread(fd, length, 16).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise TensorFileError("header is not JSON") from None
    validate_header(header)
    return header, 16 + length


def validate_header(header) -> None:
    if type(header) is not dict or set(header) != {"dtype", "shape", "strides", "nbytes"}:
        raise TensorFileError("header must hold exactly dtype, shape, strides and nbytes")
    if type(header["dtype"]) is not str or header["dtype"] not in DTYPES:
        raise TensorFileError(f"unknown dtype {str(header['dtype'])[:40]!r}")
    for key in ("shape", "strides"):
        value = header[key]
        if type(value) is not list or len(value) > MAX_DIMS or any(type(v) is not int or v < 0 for v in value):
            raise TensorFileError(f"{key} must be a list of at most {MAX_DIMS} non-negative ints")
    # NOTE: torch takes sizes and strides as int64: a shape whose extents multiply past that (even one with a zero
    # extent, which holds no bytes) makes torch.empty raise, and the file is the other side's to write
    if math.prod(max(v, 1) for v in header["shape"]) >= 2**63:
        raise TensorFileError("shape's extents multiply past 2**63")
    if header["strides"] != contiguous_strides(header["shape"]):
        raise TensorFileError("strides are not the contiguous ones for the shape")
    itemsize = torch.empty((), dtype=DTYPES[header["dtype"]]).element_size()
    if type(header["nbytes"]) is not int or header["nbytes"] != math.prod(header["shape"]) * itemsize:
        raise TensorFileError("nbytes does not match shape and dtype")


def read(path: str | os.PathLike, max_bytes: int, staging: Staging | None = None,
         max_staged: int | None = None) -> torch.Tensor:
    """The tensor in path as a CPU tensor; TensorFileError when the file is malformed.

    Without staging the tensor has memory of its own; with it, it is a view of staging's buffer, good until
    the buffer's next use: copy it (to the device, or clone) before reading or writing another file.
    max_staged: a file of more bytes is read into memory of its own, so that a file the other side made too
    large (a wrong dtype, up to max_bytes) never grows the page-locked buffer past what is expected."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise TensorFileError(f"cannot open {os.path.basename(os.fspath(path))}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TensorFileError("not a regular file")
        header, start = read_header(fd, info.st_size)
        nbytes = header["nbytes"]
        if nbytes > max_bytes:
            raise TensorTooLarge(f"{nbytes} bytes of elements (shape {header['shape']}, {header['dtype']}), more "
                                 f"than the {max_bytes} allowed here")
        if info.st_size - start != nbytes:
            raise TensorFileError(f"{info.st_size - start} bytes of elements, the header says {nbytes}")
        staged = staging is not None and nbytes and (max_staged is None or nbytes <= max_staged)
        buf = staging.take(nbytes) if staged else torch.empty(nbytes, dtype=torch.uint8)
        view = memoryview(buf.numpy()).cast("B")

        def read_range(lo: int, hi: int) -> None:
            got = lo
            while got < hi:
                n = os.preadv(fd, [view[got:hi]], start + got)
                if n <= 0:
                    raise TensorFileError("file ended early")
                got += n

        if nbytes >= PARALLEL_MIN_BYTES:
            _in_threads(read_range, _ranges(nbytes))
        else:
            read_range(0, nbytes)
    finally:
        os.close(fd)
    dtype = DTYPES[header["dtype"]]
    try:
        if nbytes == 0:
            return torch.empty(header["shape"], dtype=dtype)
        return buf.view(dtype).reshape(header["shape"])
    except (RuntimeError, TypeError, ValueError, OverflowError) as exc:   # a header validate_header let through
        raise TensorFileError(f"shape {header['shape']} cannot be made: {str(exc)[:100]}") from None
