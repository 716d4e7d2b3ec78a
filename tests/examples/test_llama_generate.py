"""``examples/llama/generate.py`` end to end on a random HF-layout checkpoint with a real tokenizer:
the ``ids:`` contract against the torch reference's greedy ids, streaming text with the timing
report, and seeded sampling."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from llama_reference import TorchLlama

LLAMA = Path(__file__).resolve().parents[2] / "examples" / "llama"
sys.path.insert(0, str(LLAMA))
import make_random  # noqa: E402


def _script():
    spec = importlib.util.spec_from_file_location("llama_generate", LLAMA / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_random.make_random(tmp_path_factory.mktemp("gen"), layers=2, hidden=64, heads=4, kv_heads=2,
                                   intermediate=96, vocab=384, max_positions=64, std=0.2)


def test_ids_contract_matches_torch_greedy(model_dir, capsys):
    out = _script().main([str(model_dir), "--ids", "1,40,41,42,7", "--max-new-tokens", "10", "--ignore-eos"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("ids: ")
    ids = [int(t) for t in lines[-1].split()[1:]]
    assert ids == out["ids"] and len(ids) == 10
    assert ids == TorchLlama(model_dir).greedy([1, 40, 41, 42, 7], 10)


def test_prompt_streams_text_and_reports_timing(model_dir, capsys):
    from tokenizers import Tokenizer

    out = _script().main([str(model_dir), "--prompt", "The compiled program", "--max-new-tokens", "6",
                          "--ignore-eos"])
    text = capsys.readouterr().out
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    assert out["prompt"] == tok.encode("The compiled program").ids and out["prompt"][0] == 1  # <s> first
    generated = tok.decode(out["ids"], skip_special_tokens=True).rstrip("\ufffd")
    assert text.startswith("The compiled program" + generated)  # the prompt, then the streamed text
    assert "time to first token" in text and "tokens/s" in text and "compile" in text
    assert "ids:" not in text  # only with --ids


def test_sampling_is_seeded(model_dir, capsys):
    args = [str(model_dir), "--ids", "1,2,3", "--max-new-tokens", "12", "--temperature", "1.5", "--top-k", "50",
            "--top-p", "0.95", "--ignore-eos"]
    script = _script()
    a = script.main(args + ["--seed", "1"])["ids"]
    b = script.main(args + ["--seed", "1"])["ids"]
    c = script.main(args + ["--seed", "2"])["ids"]
    assert a == b and a != c
    capsys.readouterr()


def test_too_long_is_a_clear_error(model_dir, capsys):
    with pytest.raises(SystemExit) as e:
        _script().main([str(model_dir), "--ids", ",".join(["5"] * 60), "--max-new-tokens", "6"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "needs 65 positions" in err and "exceeds max_position_embeddings (64)" in err


def test_the_last_position_is_usable_as_in_the_library(model_dir, capsys):
    """The last new token is returned, never fed back: prompt 4 + 61 new tokens fit 64 positions, as
    ``model.generate`` allows."""
    out = _script().main([str(model_dir), "--ids", "1,2,3,4", "--max-new-tokens", "61", "--ignore-eos"])
    capsys.readouterr()
    assert out["ids"] == TorchLlama(model_dir).greedy([1, 2, 3, 4], 61)


@pytest.mark.parametrize("context, message", [
    ("-3", r"argument --context: must be at least 1, got -3"),
    ("0", r"argument --context: must be at least 1, got 0"),
    ("x", r"argument --context: must be a positive integer, got 'x'"),
    ("65", r"--context 65 exceeds max_position_embeddings \(64\) of "),
    ("13", r"prompt \(4 tokens\) \+ --max-new-tokens \(11\) needs 14 positions .*more than --context 13"),
])
def test_context_is_checked_before_anything_runs(model_dir, capsys, context, message):
    with pytest.raises(SystemExit) as e:
        _script().main([str(model_dir), "--ids", "1,2,3,4", "--max-new-tokens", "11", "--ignore-eos",
                        "--context", context])
    assert e.value.code == 2
    out = capsys.readouterr()
    assert re.search(message, out.err), out.err
    assert "usage:" in out.err and out.out == ""  # an argparse error, before any token
    script = _script()
    assert len(script.main([str(model_dir), "--ids", "1,2,3,4", "--max-new-tokens", "11", "--ignore-eos",
                            "--context", "14"])["ids"]) == 11  # exactly enough
    capsys.readouterr()


def test_several_prompts_are_one_batch_with_an_ids_line_each(model_dir, capsys):
    prompts = [[1, 40, 41], [1, 2, 3, 4, 5, 6], [7]]
    args = [str(model_dir), "--max-new-tokens", "5", "--ignore-eos"]
    out = _script().main(args + [a for q in prompts for a in ("--ids", ",".join(map(str, q)))])
    lines = capsys.readouterr().out.strip().splitlines()
    ref = TorchLlama(model_dir)
    want = [ref.greedy(q, 5) for q in prompts]
    assert out["ids"] == want
    assert [[int(t) for t in line.split()[1:]] for line in lines[-3:]] == want and lines[-4].startswith("compile")
    with pytest.raises(SystemExit):
        _script().main(args[:1] + ["--ids", "1", "--ids", ",".join(["5"] * 60), "--max-new-tokens", "6"])
    assert "longest prompt (60 tokens) + --max-new-tokens (6) needs 65 positions" in capsys.readouterr().err
    out = _script().main(args + ["--prompt", "The compiled", "--prompt", "A"])  # text: printed at the end
    text = capsys.readouterr().out
    assert len(out["ids"]) == 2 and text.startswith("[0] The compiled") and "\n[1] A" in text
