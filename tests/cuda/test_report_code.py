"""``compiled.report(code=True)`` shows a code-generating backend's kernels: IR, the lowering's choice
and alternatives, and NVRTC's registers and spills."""

import numpy as np

import luminal as lm
import luminal.backends.cuda  # noqa: F401  (registers cuda-emulated)


def test_report_shows_each_kernels_ir_choice_and_resources(capsys):
    g = lm.Graph()
    x = g.input("x", ("B", 6))
    f = lm.compile([(x * 2).softmax(-1)], backend="cuda-emulated")
    f(x=np.ones((2, 6), np.float32))
    f.report(code=True)
    text = capsys.readouterr().out
    kernels = [line for line in text.splitlines() if line.startswith("kernel ")]
    assert len(kernels) >= 2  # two single-pass rows: max with exp(2x - max), its sum with the division
    assert "block (" in text and "for r" in text  # a GPU launch shape, a reduction loop
    assert "sm_90:" in text and "registers, 0 spill bytes" in text
    assert "(of: " in text


def test_report_without_code_prints_no_kernels(capsys):
    g = lm.Graph()
    x = g.input("x", (3,))
    f = lm.compile([x + 1], backend="cuda-emulated")
    f.report()
    assert "kernel " not in capsys.readouterr().out
