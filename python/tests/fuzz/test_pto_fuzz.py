"""The .pto fuzzer of issue 17 (python/tests/fuzz/pto_fuzz.py): mutants are
a function of seed and case number, a small budget reaches every stage, and
the harness reports a worker that aborts, segfaults, hangs or raises a
non-pypto exception (injected through the worker's self-test hooks) and
goes on with a new worker. The CI budget is .ci/fuzz.sh; this test does
not fail on what the fuzzer finds in pypto, only on a broken harness."""

import os
import subprocess
import sys

import pytest

import pypto
import pypto.pto  # noqa: F401  (pypto.pto.parse and compile below)
from pypto import errors

sys.path.insert(0, os.path.dirname(__file__))
import pto_fuzz  # noqa: E402

FUZZ = os.path.join(os.path.dirname(__file__), "pto_fuzz.py")


def _hand_seeds():
    return [(name, text, hints) for name, (text, hints) in pto_fuzz.HAND_SEEDS.items()]


def test_mutants_are_a_function_of_seed_and_case():
    seeds = _hand_seeds()
    a = [pto_fuzz.make_case(7, n, seeds) for n in range(50)]
    assert a == [pto_fuzz.make_case(7, n, seeds) for n in range(50)]
    assert [c["text"] for c in a] != [pto_fuzz.make_case(8, n, seeds)["text"] for n in range(50)]
    assert all(c["mutations"] for c in a)
    assert all(c["text"] != dict((s[0], s[1]) for s in seeds)[c["kernel"]] for c in a)
    # every mutator applies to the seeds and changes them
    rng = pto_fuzz.random.Random(0)
    ctx = {"seed_lines": ["  return"]}
    text = pto_fuzz.HAND_SEEDS["hand_orch"][0]
    for mut, _ in pto_fuzz.MUTATORS:
        outs = {mut(rng, text, ctx) for _ in range(20)}
        assert outs - {None, text}, mut.__name__


KERNELS = ["softmax", "dyn_dim"]  # the jitted seeds these tests use (all of them in .ci/fuzz.sh)
SEED_NAMES = KERNELS + ["builder_demo", "builder_matmul", "builder_binexp"] + sorted(pto_fuzz.HAND_SEEDS)


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz-worker")
    w = pto_fuzz.WorkerProcess(str(tmp), os.environ.get("PYPTO_CACHE_DIR", str(tmp / "cache")), 60)
    yield w
    w.close()


@pytest.mark.parametrize("name", SEED_NAMES)
def test_seed_passes_every_stage(name, worker):
    """An unmutated seed parses, verifies, compiles and runs (so a mutant's failure is the mutation's)."""
    seeds = {n: (text, hints) for n, text, hints in pto_fuzz.seed_texts(KERNELS)}
    assert sorted(seeds) == sorted(SEED_NAMES)
    text, hints = seeds[name]
    r = worker.run({"case": 0, "text": text, "hints": hints, "rng_seed": 1, "compile": True})
    assert r["outcome"] == "ok" and r["ran"] and "skipped" not in r, r


def test_small_budget_reaches_every_stage(tmp_path, capsys):
    stats = pto_fuzz.fuzz(seed=1, cases=200, max_compiles=10, timeout=30, out_dir=str(tmp_path), time_budget=None,
                          kernels=KERNELS)
    print(stats.line(1, stats.elapsed))
    for sig, e in stats.signatures.items():
        print(f"  {e['count']} x {sig}")
    assert stats.cases == 200
    assert stats.parsed > 20 and stats.verified > 10 and stats.compiled >= 5 and stats.ran >= 3
    assert stats.host_compiles <= 10
    assert stats.errors > 50  # mostly syntax and verify errors
    assert stats.cases >= stats.parsed >= stats.verified >= stats.compiled >= stats.ran
    # each bad outcome is saved as .pto and .json
    saved = sorted(f for f in os.listdir(tmp_path) if f.endswith(".json"))
    assert len(saved) == sum(stats.bad.values())


def test_harness_detects_crashes_hangs_and_wrong_exceptions(tmp_path):
    inject = {1: "parse:abort", 3: "verify:segv", 5: "run:hang", 6: "compile:keyerror", 8: "parse:exit"}
    stats = pto_fuzz.fuzz(seed=3, cases=10, max_compiles=3, timeout=4, out_dir=str(tmp_path), time_budget=None,
                          kernels=[], inject=inject)
    assert stats.cases == 10  # the run went on after each of them
    assert stats.bad["crash:SIGABRT"] >= 1 and stats.bad["crash:SIGSEGV"] >= 1 and stats.bad["hang"] >= 1
    assert stats.bad["exception"] >= 1 and stats.bad["worker-exit"] >= 1
    assert stats.spawns >= 5  # a new worker after each crash, hang and exit
    files = set(os.listdir(tmp_path))
    for name in ("crash-SIGABRT-parse-s3-c1", "crash-SIGSEGV-verify-s3-c3", "hang-run-s3-c5",
                 "exception-compile-s3-c6", "worker-exit-parse-s3-c8"):
        assert name + ".pto" in files and name + ".json" in files, (name, files)
    with open(tmp_path / "crash-SIGABRT-parse-s3-c1.pto") as f:
        assert f.read().startswith(pto_fuzz.SELFTEST_MARK + "parse:abort\n")


def test_a_crash_caused_by_an_earlier_kernel_is_not_blamed_on_its_case(tmp_path):
    """Case 4 aborts only in a worker where a kernel ran before (as after a kernel that wrote outside its memory):
    run again alone it passes, so it is reported as heap corruption with case 1 as a suspect."""
    stats = pto_fuzz.fuzz(seed=3, cases=6, max_compiles=5, timeout=20, out_dir=str(tmp_path), time_budget=None,
                          kernels=[], inject={1: "run:none", 4: "verify:abort-if-ran"})
    assert stats.bad["heap-corruption"] == 1, stats.bad
    with open(tmp_path / "heap-corruption-verify-s3-c4.json") as f:
        result = pto_fuzz.json.load(f)["result"]
    assert 1 in result["earlier_runs"] and "not when run alone" in result["msg"]


def test_cli_summary_and_exit_status(tmp_path):
    r = subprocess.run([sys.executable, FUZZ, "--seed", "2", "--cases", "3", "--max-compiles", "0", "--kernels",
                        "none", "--inject", "1=parse:abort", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("pto-fuzz: seed=2 cases=3 ") and "crash:SIGABRT=1" in last, r.stdout
    replay = subprocess.run([sys.executable, FUZZ, "--replay", str(tmp_path / "crash-SIGABRT-parse-s2-c1.json")],
                            capture_output=True, text=True, timeout=300)
    assert replay.returncode == 0, replay.stdout + replay.stderr  # without the hooks, the marker is a comment


def test_outcome_classes():
    def classify(e, text=""):
        try:
            raise e
        except BaseException as caught:
            r = pto_fuzz.classify_exception(caught, "parse", text)
        return r["outcome"], r["cls"]

    assert classify(errors.UserError("dim 0 is negative")) == ("error", "UserError")
    assert classify(errors.VerifyError("tile shapes differ")) == ("error", "VerifyError")
    assert classify(errors.InternalError("pypto internal error: vector::_M_range_check")) == ("bad", "std-exception")
    assert classify(errors.UserError("stoi")) == ("bad", "std-message")
    assert classify(TypeError("f(): incompatible function arguments. The following argument types are supported"))[1] \
        == "pybind-type-error"
    assert classify(KeyError("x")) == ("bad", "exception")
    assert classify(IndexError("list index out of range")) == ("bad", "exception")
    assert classify(ValueError("not raised by pypto")) == ("bad", "wrong-class")
    assert classify(UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")) == ("bad", "unicode-error")
    with pytest.raises(pypto.PtoSyntaxError) as info:
        pypto.pto.parse("// PTO Module: m\n@@@\n")
    assert pto_fuzz.classify_exception(info.value, "parse", "// PTO Module: m\n@@@\n")["outcome"] == "error"
    assert pto_fuzz.classify_exception(info.value, "parse", "")["cls"] == "bad-position"  # line 2 of a 1-line text
    try:
        pypto.pto.compile(3)
    except TypeError as e:
        assert pto_fuzz.classify_exception(e, "compile")["outcome"] == "error"


def test_pto_expressions_and_work_estimate():
    ev = pto_fuzz.eval_pto_expr
    assert ev("min(8, (M - (g0 * 8)))", {"M": 20, "g0": 2}) == 4
    assert ev("((x_0 + 7) // 8)", {"x_0": 20}) == 3
    assert ev("((mode == 1) && (i < 2))", {"mode": 1, "i": 3}) == 0
    with pytest.raises(pto_fuzz._Skip):
        ev("(n // 0)", {"n": 1})
    loop = {"kind": "loop", "var": "i", "start": "0", "stop": "n", "step": "1",
            "body": [{"kind": "call", "callee": "k"}]}
    data = {"functions": [], "orchestration": {"body": [loop]}}
    assert pto_fuzz.estimate_work(data, {"n": 5}) == 5
    with pytest.raises(pto_fuzz._Skip):
        pto_fuzz.estimate_work(data, {"n": 2**40})
    with pytest.raises(pto_fuzz._Skip):
        pto_fuzz.estimate_work({"functions": [], "orchestration": {"body": [dict(loop, step="0")]}}, {"n": 5})
