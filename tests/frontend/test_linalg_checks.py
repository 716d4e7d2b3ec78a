"""The matrix checks every unrolled linalg op shares (``_matrix``, ``luminal/frontend/ops/linalg_solve.py``):
at least 2 dims, a static size, float32/float64, square where the op needs it, and the decompositions'
size limit; each error names the op and the shape or dtype at fault."""

from __future__ import annotations

import pytest

import luminal as lm

L = lm.linalg
SQUARE = {  # op name: a call with the matrix as its only tensor operand
    "inv": L.inv, "det": L.det, "slogdet": L.slogdet, "cholesky": L.cholesky, "inv_ex": L.inv_ex,
    "matrix_exp": L.matrix_exp, "eigh": L.eigh, "cholesky_ex": L.cholesky_ex,
    "solve": lambda a: L.solve(a, a), "solve_ex": lambda a: L.solve_ex(a, a),
    "solve_triangular": lambda a: L.solve_triangular(a, a, upper=True),
}
RECTANGULAR = {"lu_factor": L.lu_factor, "lu": L.lu, "qr": L.qr, "svd": L.svd}


@pytest.mark.parametrize("name", [*SQUARE, *RECTANGULAR])
def test_matrix_checks(name):
    square = name in SQUARE
    op = SQUARE.get(name) or RECTANGULAR[name]
    dims = r"n, n" if square else r"m, n"
    g = lm.Graph()
    with pytest.raises(ValueError, match=rf"^{name}: expected a \(\*, {dims}\) matrix, got \(3,\)"):
        op(g.input("v", (3,)))
    with pytest.raises(ValueError, match=rf"^{name}: needs a static matrix size \(the algorithm is unrolled over "
                       rf"{'n' if square else 'it'}\), got \(N, N\)"):
        op(g.input("s", ("N", "N")))
    with pytest.raises(TypeError, match=f"^{name}: needs a float32 or float64 tensor, got int32"):
        op(g.input("i", (2, 2), dtype=lm.int32))
    if square:
        with pytest.raises(ValueError, match=rf"^{name}: expected a square matrix, got \(2, 3, 4\)"):
            op(g.input("r", (2, 3, 4)))


@pytest.mark.parametrize("name", ["lu_factor", "qr"])
def test_decomposition_size_limit(name):
    g = lm.Graph()
    with pytest.raises(ValueError, match=f"^{name}: is unrolled over the matrix size and supports n <= 64, got n = 65"):
        RECTANGULAR[name](g.input("x", (2, 65)))
