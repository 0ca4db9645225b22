"""The papers' findings that the seeded reproductions test, and each one's verdict from the seeds' spread.

A finding is an ordering the paper reports between two of its models on one measure. Its verdict compares the two
models' means over their seeds with the sum of their sample standard deviations: "holds" where the means differ by
more than that in the paper's direction, "reversed" where they differ that much the other way, "tie within the
spread" otherwise. A finding of equality (the paper's two numbers the same) "holds (tie within the spread)" and
"differs" beyond the spread. A model with one seed has no spread; its verdict says so rather than judge a difference
of one draw. `utils/result_tables.py` lays the verdicts out beside the numbers.
"""

import math
import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """`higher` above `lower` on each of `measures` (result keys), as the paper reports them in `paper`; with
    `equal`, the two the same."""

    claim: str
    higher: str
    lower: str
    measures: tuple[str, ...]
    paper: str
    equal: bool = False


def verdict(higher: list[float], lower: list[float], equal: bool = False) -> str:
    """The verdict on `higher` > `lower` (or `higher` = `lower` with `equal`) from each side's seeds."""
    if not all(math.isfinite(value) for value in (*higher, *lower)):
        return "not judged: a seed gave no number (NaN)"
    if len(higher) < 2 or len(lower) < 2:
        return "one seed: no spread to judge by"
    difference = statistics.mean(higher) - statistics.mean(lower)
    spread = statistics.stdev(higher) + statistics.stdev(lower)
    if equal:
        return "holds (tie within the spread)" if abs(difference) <= spread else "differs"
    if difference > spread:
        return "holds"
    return "reversed" if difference < -spread else "tie within the spread"


# --- Bordes et al. (2019), Table 2 (MSVD, ×100); "STS" there is STS12-16's mean, here STS-B test and STS16 all --------

M_C, M_P, M_B, M_R = "M_c = M(0, 0, 1)", "M_p = M(0, 1, 0)", "M_b = M(0, 0.1, 1)", "M_R (M_p, random vectors)"
_STS = ("stsb_pearson", "sts16_pearson")
GROUNDED_SKIPTHOUGHT_FINDINGS = [
    *[Finding("M_p has the highest ρ_vis", M_P, other, ("rho_vis",), f"53 > {number}")
      for other, number in ((M_B, 46), (M_C, 38), ("P", 37), ("ST", 16))],
    *[Finding("M_c has the highest C_intra", M_C, other, ("c_intra",), f"66 > {number}")
      for other, number in ((M_B, 63), ("P", 63), (M_P, 44))],
    *[Finding("M_c has the lowest C_inter", other, M_C, ("c_inter",), f"{number} > 01")
      for other, number in ((M_B, "02"), ("P", "06"), (M_P, 18))],
    Finding("M_b > M_c on STS", M_B, M_C, _STS, "64 > 62"),
    Finding("M_b > M_p on STS", M_B, M_P, _STS, "64 > 58"),
    Finding("M_b = M_c on SICK", M_B, M_C, ("sick_pearson",), "62 = 62", equal=True),
    Finding("M_b > P on STS and SICK", M_B, "P", (*_STS, "sick_pearson"), "64 > 62, 62 > 61"),
    Finding("M_R stays below M_p (Table 1's control)", M_P, M_R, ("rho_vis", *_STS, "sick_pearson"), "order only"),
    Finding("M_R beats ST (Table 1's control)", M_R, "ST", (*_STS, "sick_pearson"), "order only"),
    *[Finding("every grounded model beats ST on SICK", other, "ST", ("sick_pearson",), f"{number} > 52")
      for other, number in ((M_C, 62), (M_P, 59), (M_B, 62), ("P", 61))],
]
GROUNDED_SKIPTHOUGHT_MEASURES = {"rho_vis": "ρ_vis", "c_intra": "C_intra", "c_inter": "C_inter",
                                 "stsb_pearson": "STS-B test Pearson", "sts16_pearson": "STS16 all Pearson",
                                 "sick_pearson": "SICK test Pearson"}

# --- Kurach et al. (2017): orderings only (their tables are on MS-COCO and STS12-16) --------------------------------

_OUT_OF_DOMAIN = ("sts16", "stsb", "sick")
VETE_FINDINGS = [
    Finding("BOW > RNN > CNN out of domain (Table 1)", "BOW-mean, Pearson", "RNN-GRU, Pearson", _OUT_OF_DOMAIN,
            "order only"),
    Finding("BOW > RNN > CNN out of domain (Table 1)", "RNN-GRU, Pearson", "CNN, Pearson", _OUT_OF_DOMAIN,
            "order only"),
    Finding("BOW-mean ≈ BOW-sum (Table 3)", "BOW-mean, Pearson", "BOW-sum, Pearson", ("coco_test", "sick"),
            "about equal", equal=True),
    *[Finding("Pearson > SKT_5 > rank > SKT_1 > SKT_0.2 > covariance (Table 4)", f"BOW-mean, {higher}",
              f"BOW-mean, {lower}", _OUT_OF_DOMAIN, "order only")
      for higher, lower in (("Pearson", "SKT_5"), ("SKT_5", "rank"), ("rank", "SKT_1"), ("SKT_1", "SKT_0.2"),
                            ("SKT_0.2", "covariance"))],
    *[Finding("sentence-level > word-level (Table 6)", f"{encoder}, Pearson", f"{encoder}, Pearson, word-level",
              ("coco_test", *_OUT_OF_DOMAIN), "order only") for encoder in ("BOW-mean", "RNN-GRU")],
    *[Finding("images > text only (PureTextRnn)", f"{encoder}, Pearson", f"{encoder}, Pearson, text only (PureText)",
              ("coco_test", *_OUT_OF_DOMAIN), "order only") for encoder in ("BOW-mean", "RNN-GRU")],
]
VETE_MEASURES = {"coco_test": "COCO-Test-style (Flickr8k test)", "sts16": "STS16 all", "stsb": "STS-B test",
                 "sick": "SICK test"}
