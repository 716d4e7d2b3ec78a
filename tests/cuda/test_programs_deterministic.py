"""The GPU smoke test compares two compiles of each example program (one on the emulator, one on
the device); this checks, on any machine, that two compiles of a builder are the same program on
the same data, and that the emulated programs agree with the reference interpreter."""

import numpy as np
import pytest
from programs import BUILDERS, compiled, train_step


@pytest.mark.parametrize("builder", BUILDERS, ids=lambda b: b.__name__)
def test_two_compiles_of_a_program_agree_and_match_the_reference(builder):
    f1, inputs1 = compiled(builder)
    f2, inputs2 = compiled(builder)
    ref, _ = compiled(builder, backend="reference")
    for k in inputs1:
        np.testing.assert_array_equal(inputs1[k], inputs2[k])
    want = ref(**inputs1)
    for a, b, w in zip(f1(**inputs1), f2(**inputs2), want, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a.astype(np.float64), w.astype(np.float64), rtol=2e-2, atol=2e-2)


def test_two_train_steps_agree():
    s1, inputs, _ = train_step()
    s2, _, _ = train_step()
    for _ in range(3):
        assert float(s1(**inputs)) == float(s2(**inputs))
