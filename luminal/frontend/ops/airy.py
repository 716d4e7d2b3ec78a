"""torch.special.airy_ai: the Airy function Ai, computed in float64 and rounded once, with its derivative
Ai' as the gradient (torch's airy_ai has no gradient: its result does not require grad). Split from
``special.py`` for length; ``luminal/special.py`` exports it.

The pieces (x the input, ``a = |x|``, ``zeta = 2/3 a**1.5``):
- ``-10 < x <= 0``: Chebyshev expansions of Ai in x on [-10, -6], [-6, -2] and [-2, 0], whose maps to
  [-1, 1] (``x / 2 + 4``, ``x / 2 + 2``, ``x + 1``) are exact but near 0, where Ai varies slowly: one
  expansion on [-10, 0] maps with a rounding of up to 5 ulps of x, 12 ulps of Ai where it oscillates
  fastest. Absolute error about 2 ulps of the envelope ``|x|**(-1/4) / sqrt(pi)`` (near the zeros,
  -2.338, -4.088, ..., absolute, as any float64 evaluation's);
- ``0 < x <= 2``: a Chebyshev expansion of ``Ai(x) exp(x)``, times ``exp(-x)`` (relative);
- ``2 < x <= 10``: of ``E(x) = 2 sqrt(pi) x**(1/4) exp(zeta) Ai(x)`` (1 at infinity), and past 10
  the asymptotic series ``E = sum (-1)**k u_k zeta**-k`` (DLMF 9.7.5, 24 terms: the first left out is
  below 1e-18 at x = 10); ``Ai = E exp(-zeta) / (2 sqrt(pi) x**(1/4))``, with ``exp(-zeta)`` as
  ``2**-n exp(-r)`` from ``zeta`` in two parts (``_zeta_parts``) and ln 2 in two (Cody and Waite), so
  the product rounds once also where it is subnormal (x past 103.9; 0 from 107.4 on, where
  torch's is 0 from 103.9): relative error a few ulps (``exp(-zeta)`` as written is off by 50 ulps
  at zeta = 700);
- ``x <= -10``: ``(cos(zeta - pi/4) P + sin(zeta - pi/4) Q) / (sqrt(pi) a**(1/4))`` with P and Q the
  even and odd parts of the same series (DLMF 9.7.9), and the phase ``zeta`` in two parts: a float64
  ``zeta`` is off by up to 1.5 ulps, which is 1e-13 rad at x = -1000 and the whole phase past
  x = -1e11 (torch's error: 1.5e-12 of the envelope at -1000, 0.13 at -1e12); in two parts it is
  exact to about ``zeta * 2e-32`` rad (double-double's limit), so the absolute error stays a few
  ulps of the envelope ``a**(-1/4) / sqrt(pi)`` to x = -1e11 and grows as ``zeta * 2e-32`` beyond
  (11 ulps at -3e11, 1e-13 of the envelope at -1e13, 1.6e-10 at -1e15; past -1e19 the value is only
  bounded by the envelope).
Coefficients: mpmath at 50 digits (Chebyshev interpolation at 120 nodes, cut where the rest is below
1e-18). Ai' has the same pieces (its own tables and DLMF's ``v_k``), Ai'' is ``x Ai(x)``.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from luminal.frontend.checks import tensor_op
from luminal.frontend.float64_paths import plain_unless_float64
from luminal.frontend.ops.elementwise import (
    _cheb,
    _derivative,
    _poly,
    abs_,
    add,
    cos,
    div,
    exp,
    exp2,
    gt,
    isinf,
    isnan,
    le,
    logical_and,
    maximum,
    minimum,
    mul,
    neg,
    round_,
    sin,
    sqrt,
    sub,
    where,
)
from luminal.frontend.ops.special import _bessel_f64
from luminal.frontend.tensor import GraphTensor

_AIRY_TERMS = 24  # the asymptotic series' terms past |x| = 10 (zeta = 21.08): the next is below 1e-18
_PHASE_MAX = 2.0**300  # |x| past which zeta's parts are of this value (Veltkamp's split would overflow)
_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's split of a float64 into two halves of 26 bits
_TWO_THIRDS = (0.6666666666666666, 3.700743415417188e-17)  # 2/3 = hi + lo
_LN2 = (0.6931471803691238, 1.9082149292705877e-10)  # ln 2 = hi + lo, hi with 21 trailing zero bits
_NEG_PIECES = ((-10.0, -6.0), (-6.0, -2.0), (-2.0, 0.0))  # (widths 4, 4, 2: see the module docstring)
_UNDERFLOW = 800.0  # zeta past which exp(-zeta) is 0 whatever the factors


@functools.cache
def _airy_series() -> tuple[float, ...]:
    """DLMF 9.7.2's ``u_k``, k < ``_AIRY_TERMS``: ``u_0 = 1``,
    ``u_k = (6k - 5)(6k - 3)(6k - 1) / ((2k - 1) 216 k) u_(k-1)`` (``v_k = -(6k + 1) / (6k - 1) u_k``)."""
    u, out = Fraction(1), [1.0]
    for k in range(1, _AIRY_TERMS):
        u *= Fraction((6 * k - 5) * (6 * k - 3) * (6 * k - 1), (2 * k - 1) * 216 * k)
        out.append(float(u))
    return tuple(out)


def _split(v):
    """Veltkamp's split: ``v = hi + lo`` exactly, each with at most 26 significant bits (``v`` a tensor
    or a Python float, split in float64 alike)."""
    if isinstance(v, float):
        t = v * _SPLIT
        hi = t - (t - v)
        return hi, v - hi
    t = mul(v, _SPLIT)
    hi = sub(t, sub(t, v))
    return hi, sub(v, hi)


def _two_prod(x, y):
    """``x * y = p + e`` exactly (Dekker), ``p`` the rounded product."""
    p = mul(x, y)
    (xh, xl), (yh, yl) = _split(x), _split(y)
    return p, add(add(add(sub(mul(xh, yh), p), mul(xh, yl)), mul(xl, yh)), mul(xl, yl))


def _zeta_parts(a):
    """``2/3 a**1.5 = hi + lo`` for float64 ``a`` in [1, 2**300], to about 1e-32 relative: ``s = sqrt(a)``
    and its correction ``(a - s**2) / (2 s)`` (``s**2`` exact by ``_two_prod``), ``a s`` exact, and 2/3 in
    two parts."""
    s = sqrt(a)
    sq, sq_err = _two_prod(s, s)
    ds = div(sub(sub(a, sq), sq_err), mul(s, 2.0))
    h, h_err = _two_prod(a, s)
    h_err = add(h_err, mul(a, ds))
    hi, lo = _two_prod(h, _TWO_THIRDS[0])
    return hi, add(lo, add(mul(h_err, _TWO_THIRDS[0]), mul(h, _TWO_THIRDS[1])))


def _exp_neg(hi, lo):
    """``exp(-(hi + lo))`` as ``(m, 2**-n)`` for ``0 <= hi <= _UNDERFLOW``: ``n`` the nearest integer to
    ``hi / ln 2`` and ``m = exp(-r)``, ``r = hi + lo - n ln 2`` (|r| <= 0.35, ln 2 in two parts: ``n ln2_hi``
    exact), so the product of ``m`` with the other factors rounds once, also into the subnormals."""
    n = round_(mul(hi, 1 / math.log(2)))
    r = sub(add(sub(hi, mul(n, _LN2[0])), lo), mul(n, _LN2[1]))
    return exp(neg(r)), exp2(neg(n))


def _airy(deriv: bool, w):
    """Ai (``deriv``: Ai') of float64 ``w`` (the module docstring), with its derivative as the gradient
    (itself differentiable): Ai' for Ai, ``x Ai(x)`` for Ai'."""
    u = _airy_series()
    if deriv:
        u = tuple(-(6 * k + 1) / (6 * k - 1) * c for k, c in enumerate(u))  # v_k
    a = abs_(w)
    # -10 < x <= 0 and 0 < x <= 2: Chebyshev expansions in x
    neg_near = None
    for (lo, hi), coefs in zip(_NEG_PIECES, _AIP_NEG if deriv else _AI_NEG):
        v = _cheb(maximum(minimum(w, hi), lo), coefs, lo, hi)
        neg_near = v if neg_near is None else where(le(w, lo), neg_near, v)
    xp = where(logical_and(gt(w, 0.0), le(w, 2.0)), w, 1.0)
    pos_near = mul(_cheb(xp, _AIP_NEAR if deriv else _AI_NEAR, 0.0, 2.0), exp(neg(xp)))
    # x > 2: E(x) (a Chebyshev expansion to 10, the asymptotic series past it) times exp(-zeta)
    ap = minimum(maximum(w, 2.0), 200.0)  # (zeta(200) = 1886: exp(-zeta) is 0 from 107.4 on)
    hi, lo = _zeta_parts(ap)
    series = _poly(div(1.0, hi), [(-1) ** k * c for k, c in enumerate(u)])
    e = where(le(ap, 10.0), _cheb(ap, _AIP_MID if deriv else _AI_MID, 2.0, 10.0), series)
    m, scale = _exp_neg(minimum(hi, _UNDERFLOW), lo)
    quarter = sqrt(sqrt(ap))
    fac = mul(quarter, -1 / (2 * math.sqrt(math.pi))) if deriv else div(1 / (2 * math.sqrt(math.pi)), quarter)
    pos_far = mul(mul(mul(e, m), fac), scale)
    # x <= -10: the oscillatory form, its phase zeta in two parts
    an = maximum(a, 10.0)
    hi, lo = _zeta_parts(minimum(an, _PHASE_MAX))
    t = div(1.0, hi)
    t2 = mul(t, t)
    p = _poly(t2, [(-1) ** j * c for j, c in enumerate(u[0::2])])
    q = mul(_poly(t2, [(-1) ** j * c for j, c in enumerate(u[1::2])]), t)
    sh, ch, sl, cl = sin(hi), cos(hi), sin(lo), cos(lo)  # (lo reaches half an ulp of hi: 64 at x = -1e12)
    s, c = add(mul(sh, cl), mul(ch, sl)), sub(mul(ch, cl), mul(sh, sl))
    cos_, sin_ = add(c, s), sub(s, c)  # sqrt(2) cos(zeta - pi/4), sqrt(2) sin(zeta - pi/4)
    quarter = sqrt(sqrt(an))
    if deriv:
        neg_far = mul(sub(mul(sin_, p), mul(cos_, q)), mul(quarter, 1 / math.sqrt(2 * math.pi)))
    else:
        neg_far = div(add(mul(cos_, p), mul(sin_, q)), mul(quarter, math.sqrt(2 * math.pi)))
    out = where(le(w, -10.0), neg_far, where(le(w, 0.0), neg_near, where(le(w, 2.0), pos_near, pos_far)))
    # Ai(-inf) = 0 (the envelope's limit); Ai'(-inf) has none (its envelope grows): NaN
    out = where(isinf(w), where(gt(w, 0.0), 0.0, math.nan if deriv else 0.0), out)
    out = where(isnan(w), w, out)

    def slope(w, y):
        return mul(w, _airy(False, w)) if deriv else _airy(True, w)

    return _derivative(out, w, slope)


@plain_unless_float64
@tensor_op("airy_ai")
def airy_ai(input) -> GraphTensor:  # noqa: A002 - torch's names
    """torch.special.airy_ai: the Airy function Ai, the solution of ``y'' = x y`` that decays as x grows
    (``exp(-2/3 x**1.5) / (2 sqrt(pi) x**(1/4))``), oscillating for negative x inside the envelope
    ``|x|**(-1/4) / sqrt(pi)``. Computed in float64 and rounded once (``airy.py``'s docstring): for
    x >= 0 relative error a few float64 ulps, subnormal values included (0 from x = 107.4 on; torch
    gives 0 from 103.9); for x < 0 absolute error a few ulps of the envelope to x = -1e11 (torch: 1.5e-12
    of it at -1000, 3e-6 at -2.1). Ai(+-inf) is 0 (torch: NaN), NaN stays NaN.

    The gradient is the derivative Ai'(x) (computed as Ai, NaN at -inf, where it oscillates without
    bound), itself differentiable (Ai'' = x Ai). torch's airy_ai has no gradient: its result does not
    require grad, so ``backward`` through it fails. Int and bool inputs give float32; 16-bit inputs
    compute in float64 too (torch's has no 16-bit kernel).

    Args:
        input: a tensor.
    """
    return _bessel_f64("airy_ai", functools.partial(_airy, False), input)


# Chebyshev coefficients (mpmath, 50 digits): Ai and Ai' on [-10, -6], [-6, -2] and [-2, 0]; Ai(x) exp(x)
# and Ai'(x) exp(x) on [0, 2]; E(x) and F(x) = -2 sqrt(pi) x**(-1/4) exp(zeta) Ai'(x) on [2, 10]
_AI_NEG = ((-0.01976353257837636, -0.20222337571187343, -0.0701896503012007, -0.1402840017064355,
    -0.08045781020398889, 0.2162136087416822, 0.02549173862503571, -0.0675400423609146, 0.0014720012376449067,
    0.009915328092709398, -0.0011623096073121585, -0.0008109305742260222, 0.0001701954193326163,
    3.6820835951939855e-05, -1.321790311810817e-05, -5.805660258148494e-07, 6.368399957116591e-07,
    -3.558031790565881e-08, -1.94219531036473e-08, 2.8745461092762327e-09, 3.215681469149143e-10,
    -1.0557484942295288e-10, 8.899914782017152e-13, 2.37594302027783e-12, -2.1410575258859203e-13,
    -3.066422929518355e-14, 6.4891695084548224e-15, 3.675692089451786e-17, -1.1157618085478412e-16,
    7.90878164972333e-18, 1.079168258004886e-18), (-0.04590139302305601, 0.0359965586015096, -0.010242874765900406,
    0.3363090886856391, -0.010702532456770681, -0.10508066586752478, 0.01960743775475995, 0.011433997553759206,
    -0.003949858697404208, -0.0003584267454668866, 0.0003336303340118554, -2.7183337046539296e-05,
    -1.3429935547268037e-05, 3.0570085818263757e-06, 1.373801927912549e-07, -1.2739948668990628e-07,
    1.1268349785888177e-08, 2.410849367157261e-09, -5.853587076509304e-10, 6.412601403331173e-12,
    1.2751379939418277e-11, -1.5099435786734477e-12, -9.517979425719654e-14, 3.789054831015164e-14,
    -2.1383366193057738e-15, -4.1336451761283797e-16, 7.291184783411953e-17, -7.950522837497128e-19,
    -9.413389048258454e-19), (0.4103497557121241, 0.04736516810743095, -0.12222264710458113, 0.01744622658249683,
    0.0030420995130449676, -0.0010162730790367605, 5.1047769377317e-05, 1.5154479489833278e-05,
    -2.5430431859421106e-06, 3.974467485714619e-08, 2.821348054381971e-08, -3.0194879616329483e-09,
    -1.3447960553658119e-11, 2.7538805910289185e-11, -2.077062548667609e-12, -3.9804984588894514e-14,
    1.6558006978747336e-14, -9.263111030876985e-16, -2.949763857895336e-17, 6.748221006634185e-18))
_AI_NEAR = (0.33670019167482507, -0.05236898588281803, -0.03060993791997315, 0.003984472722762132,
    0.00045243798638020996, -0.00010262369086492433, -4.1825804086959417e-07, 1.2976517686715515e-06,
    -6.806051502550766e-08, -8.304506582655047e-09, 9.801176929925504e-10, 1.1470686996967361e-11,
    -6.938853891456652e-12, 2.543323779126992e-13, 2.6066864841845407e-14, -2.4048836670521994e-15,
    -1.74274616356787e-17, 1.0983449261668292e-17)
_AI_MID = (0.9891652293181985, 0.0109937606712061, -0.004754191833793598, 0.0019230410391953743,
    -0.0007494791542687225, 0.0002853139913487309, -0.00010690074862069221, 3.9609004250035775e-05,
    -1.4559641461105164e-05, 5.321511982415587e-06, -1.9371786055076163e-06, 7.032311343259507e-07,
    -2.548212265647422e-07, 9.223642025586974e-08, -3.336926232725127e-08, 1.207147000237986e-08,
    -4.3680866991911275e-09, 1.5814419691862827e-09, -5.729700173521215e-10, 2.0777379700055515e-10,
    -7.541815173104321e-11, 2.7404328024067616e-11, -9.96876530968952e-12, 3.6304001168805086e-12,
    -1.3236207552166699e-12, 4.831347442344268e-13, -1.7654854133611737e-13, 6.45867690571297e-14,
    -2.3653565800152162e-14, 8.671848915361311e-15, -3.1825557514234654e-15, 1.1691655718824298e-15,
    -4.299299429625298e-16, 1.5824384979098394e-16, -5.829740793199102e-17, 2.1495662377650693e-17,
    -7.932640471790026e-18, 2.929790461525353e-18, -1.0829142879642839e-18)
_AIP_NEG = ((0.03299974641674818, -0.30724005516102176, 0.2682228685453698, -0.16686075455862037,
    0.6890748736646762, 0.15497048625733517, -0.3919931700437347, 0.0020200545071209094, 0.08078712648266748,
    -0.009755955394038344, -0.008450826351717107, 0.0018671406790832415, 0.0004694099647691372,
    -0.00017520435290815407, -9.260902606080927e-06, 9.846290745360276e-06, -5.524122188581873e-07,
    -3.431491860262692e-07, 5.2453185538012474e-08, 6.4459698393822035e-09, -2.1631905382359494e-09,
    1.460690108391686e-11, 5.38812996460613e-11, -4.972911436520877e-12, -7.653898203287853e-13,
    1.6562662560533242e-13, 1.215912050803356e-15, -3.0917816144929676e-15, 2.2347518665137363e-16,
    3.23514494409878e-17, -5.879481190602957e-18), (0.29803574598754895, 0.025927115036716943, 0.5600749333735884,
    0.04641286456851776, -0.44885233268332897, 0.08922299439560048, 0.0765509966542949, -0.028421632132959215,
    -0.0034869862220195343, 0.0031772374462744443, -0.00026114551281755503, -0.00015906589384410969,
    3.7871194694377235e-05, 2.093332723106752e-06, -1.8699168693656467e-06, 1.7001002402918341e-07,
    4.10754309829475e-08, -1.0283572545027414e-08, 9.09917412740577e-11, 2.5288419268933313e-10,
    -3.0847685389234584e-11, -2.1434060990324227e-12, 8.611297629078173e-13, -4.9450625374098776e-14,
    -1.0352848225670357e-14, 1.8694534892397982e-15, -1.87352853494075e-17, -2.625455444730952e-17,
    2.7311263118347457e-18), (0.09472888866126439, -0.4639813438831812, 0.09472744110766688, 0.024909244535143326,
    -0.009949918387314101, 0.0005724484307835848, 0.00021281240305350406, -4.012480174421914e-05,
    6.496901958381535e-07, 5.638892308546325e-07, -6.571395159047789e-08, -3.803800217616098e-10,
    7.147835654469761e-10, -5.7628968473814966e-11, -1.2253882205427325e-12, 5.28782888878083e-13,
    -3.123868287589713e-14, -1.0733344418316725e-15, 2.558946290846151e-16, -1.1419452989351478e-17))
_AIP_NEAR = (-0.3776198688924119, -0.06645735053421307, 0.053508555250435595, -0.00037105745990062734,
    -0.0014606569924905577, 9.653506268474866e-05, 1.8436160579765218e-05, -2.3671834584120797e-06,
    -8.11617074805885e-08, 2.7741057250249242e-08, -7.212217112978545e-10, -1.7727387925378172e-10,
    1.3479721652870612e-11, 4.749687602325918e-13, -9.78409291580656e-14, 1.8338062406717592e-15,
    3.898731569814646e-16, -2.43821033003901e-17)
_AIP_MID = (1.0154732571144534, -0.01586815719173369, 0.006952061308280519, -0.002853536086561439,
    0.001129983892651808, -0.00043754229297694025, 0.00016689904139825936, -6.300429208688947e-05,
    2.3610113865536045e-05, -8.801712525883221e-06, 3.2692592115868563e-06, -1.211270458163788e-06,
    4.4803763378729407e-07, -1.6555806024027422e-07, 6.114504333065267e-08, -2.25791715090073e-08,
    8.338950234793326e-09, -3.0807845194095817e-09, 1.1387378633765177e-09, -4.2115889608709483e-10,
    1.5586936819570113e-10, -5.7728429034927483e-11, 2.1396652071260645e-11, -7.936616197290554e-12,
    2.946183147894531e-12, -1.0945018439091502e-12, 4.069119722575095e-13, -1.5139253943070614e-13,
    5.636635321655452e-14, -2.1000872923255436e-14, 7.829726815257342e-15, -2.92103880252979e-15,
    1.0904330253247108e-15, -4.073063410274314e-16, 1.5222765856051518e-16, -5.692540732127429e-17,
    2.1298507641676016e-17, -7.972843771100667e-18, 2.9859969200856024e-18, -1.1188421578677654e-18)
