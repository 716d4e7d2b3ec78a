"""einsum and tensordot as broadcast-multiply + sum.

Each operand's labels are lined up (diagonals taken for a label repeated in one operand, labels
seen nowhere else summed out first), then the operands are multiplied in pairs from the left, each
product summed over the labels no later operand or the output uses: ``ij,jk->ik`` becomes exactly
``matmul``'s form (a broadcast product over ``(i, j, k)`` summed over ``j``), which the compiler's
matmul rules turn into a GEMM.
"""

from __future__ import annotations

import string

from luminal.core.errors import op_error
from luminal.core.symbolic import is_static, shape_str
from luminal.frontend.checks import check_tensors
from luminal.frontend.ops.elementwise import mul
from luminal.frontend.ops.movement import diagonal, movedim
from luminal.frontend.ops.reduce import sum as sum_
from luminal.frontend.tensor import GraphTensor

_LETTERS = set(string.ascii_letters)


def _check_letters(subs: str, where: str, eq: str, *operands) -> None:
    """Subscripts are letters (torch's [a-zA-Z]); ``where`` names the operand or the output."""
    for c in subs:
        if c not in _LETTERS:
            raise op_error(ValueError, "einsum", f"invalid subscript {c!r} in {where} of {eq!r}: use letters a-z, "
                           "A-Z", *operands)


def _parse_term(term: str, t: GraphTensor, k: int, eq: str):
    """The labels of one operand: letters, and ``("...", j)`` for its j-th broadcast dim counted
    from the right."""
    if term.count("...") > 1 or "." in term.replace("...", ""):
        raise op_error(ValueError, "einsum", f"operand {k}: bad ellipsis in {term!r} of {eq!r} (one '...' at "
                       "most)", t)
    head, _, tail = term.partition("...")
    _check_letters(head + tail, f"operand {k}'s {term!r}", eq, t)
    n_ell = t.ndim - len(head) - len(tail)
    if ("..." in term and n_ell < 0) or ("..." not in term and n_ell != 0):
        raise op_error(ValueError, "einsum", f"operand {k} has {t.ndim} dims but {len(head + tail)} subscripts "
                       f"{term!r} in {eq!r}" + ("" if "..." in term else " (and no '...')"), t)
    return list(head) + [("...", j) for j in reversed(range(n_ell))] + list(tail)


def _diagonal(t: GraphTensor, j: int, i: int) -> GraphTensor:
    """The diagonal of dims ``j`` and ``i`` (of equal size ``n``) as a new last dim. A static ``n``
    takes ``diagonal``'s strided slice; a symbolic one (which ``diagonal`` refuses) reads element
    ``(r, r)`` of the flattened pair, at ``r * (n + 1)``, as column 0 of the flat padded to ``n * (n + 1)``
    and viewed as ``(n, n + 1)``."""
    n = t.shape[i]
    if is_static(n):
        return diagonal(t, 0, j, i)
    t = movedim(t, (j, i), (-2, -1))
    lead = t.shape[:-2]
    wide = t.reshape(*lead, n * n).pad((0, n)).reshape(*lead, n, n + 1)
    return wide._slice_dim(len(lead) + 1, 0, 1, 1).squeeze(-1)


def _take_diagonals(t: GraphTensor, labels: list, k: int, eq: str):
    """A label repeated within one operand reads its diagonal: the two dims become one (last)."""
    while True:
        seen = {}
        for i, lab in enumerate(labels):
            if lab in seen:
                j = seen[lab]
                if t.shape[i] != t.shape[j]:
                    raise op_error(ValueError, "einsum", f"subscript {lab!r} is repeated in operand {k} of {eq!r} "
                                   f"over dims of sizes {t.shape[j]} and {t.shape[i]}", t)
                t = _diagonal(t, j, i)
                labels = [lab2 for k2, lab2 in enumerate(labels) if k2 not in (i, j)] + [lab]
                break
            seen[lab] = i
        else:
            return t, labels


def _align(t: GraphTensor, labels: list, target: list, sizes: dict) -> GraphTensor:
    """``t`` (dims named ``labels``, a subset of ``target``) permuted, unsqueezed and expanded to
    ``target``'s order and sizes."""
    order = [labels.index(lab) for lab in target if lab in labels]
    t = t.permute(*order) if order != list(range(len(order))) else t
    shape = tuple(t.shape[order.index(labels.index(lab))] if lab in labels else 1 for lab in target)
    t = t.reshape(shape) if shape != t.shape else t
    full = tuple(sizes[lab] for lab in target)
    return t.expand(*full) if full != t.shape else t


def _sublist_equation(args: tuple):
    """torch's sublist format ``einsum(op1, [0, 1], op2, [1, 2], [0, 2])`` as an equation and its
    operands: subscript ``i`` in [0, 26) is the letter ``'A' + i``, in [26, 52) ``'a' + i - 26``, and
    ``Ellipsis`` is ``...`` (the letters torch maps them to, so the implicit output's order agrees)."""

    def term(sub, where: str) -> str:
        if not isinstance(sub, (tuple, list)):
            raise op_error(TypeError, "einsum", f"{where} must be a list of subscripts, got {type(sub).__name__}")
        out = []
        for i in sub:
            if i is Ellipsis:
                out.append("...")
            elif isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 52:
                out.append(chr(ord("A") + i) if i < 26 else chr(ord("a") + i - 26))
            else:
                raise op_error(ValueError, "einsum", f"{where}: subscript {i!r} is not an int in [0, 52) or ...")
        return "".join(out)

    operands, terms = args[0::2], args[1::2]
    rhs = ""
    if len(args) % 2 and isinstance(args[-1], GraphTensor):
        raise op_error(TypeError, "einsum", f"operand {len(args) // 2} has no sublist after it", *operands)
    if len(args) % 2:  # an odd count ends with the output's sublist
        operands, terms = args[:-1][0::2], args[:-1][1::2]
        rhs = "->" + term(args[-1], "the output sublist")
    lhs = ",".join(term(t, f"the sublist of operand {k}") for k, t in enumerate(terms))
    return lhs + rhs, operands


def einsum(equation: str, *operands) -> GraphTensor:
    """torch.einsum: sum of products over the subscripts in ``equation``.

    Args:
        equation: ``"ij,jk->ik"`` style subscripts: letters, ``...`` for broadcast dims (aligned
            from the right and broadcast across operands), a letter repeated in one operand takes its
            diagonal; without ``->`` the output is the broadcast dims then the letters used once, in
            alphabetical order; an explicit output without ``...`` sums the broadcast dims. Or torch's
            sublist format ``einsum(op1, sublist1, op2, sublist2, ..., [sublist_out])``, a sublist
            being ints in [0, 52) and ``...``.
        operands: the tensors (or one sequence of them).
    """
    if isinstance(equation, GraphTensor):
        equation, operands = _sublist_equation((equation, *operands))
    if len(operands) == 1 and isinstance(operands[0], (tuple, list)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise op_error(TypeError, "einsum", f"equation must be a str, got {type(equation).__name__}")
    if not operands:
        raise op_error(ValueError, "einsum", "needs at least one operand")
    check_tensors("einsum", **{f"operands[{i}]": t for i, t in enumerate(operands)})
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise op_error(ValueError, "einsum", f"{eq!r} has {len(terms)} operand subscripts, got {len(operands)} "
                       "operands", *operands)
    ops, labels, counts = [], [], {}
    for k, (term, t) in enumerate(zip(terms, operands)):
        labs = _parse_term(term, t, k, eq)
        for lab in labs:
            counts[lab] = counts.get(lab, 0) + 1
        t, labs = _take_diagonals(t, labs, k, eq)
        ops.append(t)
        labels.append(labs)
    # sizes, with 1 broadcasting (as torch does for ... dims and single letters alike)
    sizes = {}
    for t, labs in zip(ops, labels):
        for lab, n in zip(labs, t.shape):
            old = sizes.get(lab)
            if old is None or (is_static(old) and old == 1):
                sizes[lab] = n
            elif n != old and not (is_static(n) and n == 1):
                name = "..." if isinstance(lab, tuple) else lab
                raise op_error(ValueError, "einsum", f"subscript {name!r} of {eq!r} has sizes {old} and {n}, "
                               f"which do not broadcast (shapes {', '.join(shape_str(o.shape) for o in operands)})",
                               *operands)
    n_ell = max((sum(isinstance(lab, tuple) for lab in labs) for labs in labels), default=0)
    ell = [("...", j) for j in reversed(range(n_ell))]
    if arrow:
        if rhs.count("...") > 1 or "." in rhs.replace("...", ""):
            raise op_error(ValueError, "einsum", f"bad ellipsis in the output {rhs!r} of {eq!r} (one '...' at most)",
                           *operands)
        head, _, tail = rhs.partition("...")
        _check_letters(head + tail, "the output", eq, *operands)
        for c in head + tail:
            if c not in sizes:
                raise op_error(ValueError, "einsum", f"output subscript {c!r} of {eq!r} appears in no input operand",
                               *operands)
        if len(set(head + tail)) != len(head + tail):
            twice = next(c for c in head + tail if (head + tail).count(c) > 1)
            raise op_error(ValueError, "einsum", f"output subscript {twice!r} appears more than once in {eq!r}",
                           *operands)
        # an output without '...' sums the broadcast dims, as torch ('...->' is the sum of all)
        out = list(head) + (ell if "..." in rhs else []) + list(tail)
    else:
        out = ell + sorted(lab for lab, c in counts.items() if c == 1 and not isinstance(lab, tuple))
    # labels no other operand and not the output uses are summed out of their operand first
    result, res_labels = None, []
    for k, (t, labs) in enumerate(zip(ops, labels)):
        later = {lab for labs2 in labels[k + 1:] for lab in labs2} | set(out)
        if result is not None:
            own = [i for i, lab in enumerate(labs) if lab not in later and lab not in res_labels]
            if own:  # summed out before the product, which then stays as small as it can
                t = sum_(t, tuple(own))
                labs = [lab for i, lab in enumerate(labs) if i not in own]
            union = res_labels + [lab for lab in labs if lab not in res_labels]
            keep = [lab for lab in union if lab in later]
            a = _align(result, res_labels, union, sizes)
            b = _align(t, labs, union, sizes)
            prod = mul(a, b)
        else:
            union, prod = labs, t
            keep = [lab for lab in labs if lab in later]
        drop = [i for i, lab in enumerate(union) if lab not in keep]
        result = sum_(prod, tuple(drop)) if drop else prod
        res_labels = keep
    order = [res_labels.index(lab) for lab in out]
    result = result.permute(*order) if order != list(range(len(order))) else result
    return result


def tensordot(a: GraphTensor, b: GraphTensor, dims=2) -> GraphTensor:
    """torch.tensordot: contract the last ``dims`` dims of ``a`` with the first ``dims`` of ``b``, or
    the listed dims ``dims = (dims_a, dims_b)`` pairwise; the result has ``a``'s remaining dims then
    ``b``'s.

    Args:
        a: the first tensor.
        b: the second tensor.
        dims: an int, or a pair of int sequences (or of ints) of equal length.
    """
    check_tensors("tensordot", a=a, b=b)
    if isinstance(dims, int) and not isinstance(dims, bool):
        if dims < 0 or dims > min(a.ndim, b.ndim):
            raise op_error(ValueError, "tensordot", f"dims={dims} is out of range for {a.ndim}-d and {b.ndim}-d "
                           "tensors", a, b)
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    elif isinstance(dims, (tuple, list)) and len(dims) == 2:
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
        if len(da) != len(db):
            raise op_error(ValueError, "tensordot", f"dims {dims}: both lists must have the same length", a, b)
        da = [a._axis(d, "tensordot") for d in da]
        db = [b._axis(d, "tensordot") for d in db]
        for name, ds in (("a", da), ("b", db)):
            if len(set(ds)) != len(ds):
                twice = next(d for d in ds if ds.count(d) > 1)
                raise op_error(ValueError, "tensordot", f"dim {twice} of {name} appears more than once in dims "
                               f"{dims}", a, b)
    else:
        raise op_error(TypeError, "tensordot", f"dims must be an int or a pair of dim lists, got {dims!r}", a, b)
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise op_error(ValueError, "tensordot", f"contracted dims differ: dim {i} of a ({a.shape[i]}) vs "
                           f"dim {j} of b ({b.shape[j]})", a, b)
    if a.ndim + b.ndim > len(string.ascii_letters):
        raise op_error(ValueError, "tensordot", f"{a.ndim}-d and {b.ndim}-d operands: at most "
                       f"{len(string.ascii_letters)} dims in all", a, b)
    letters = iter(string.ascii_letters)
    la = [next(letters) for _ in range(a.ndim)]
    lb = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(da, db):
        lb[j] = la[i]
    out = [la[i] for i in range(a.ndim) if i not in da] + [lb[j] for j in range(b.ndim) if j not in db]
    return einsum(f"{''.join(la)},{''.join(lb)}->{''.join(out)}", a, b)

