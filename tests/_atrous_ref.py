"""The à trous tables both variants' tests share: DUCHAMP 1.6.1's filter taps and the first
entries of its noise-factor tables (per dimension), the number of scales DUCHAMP uses for an
axis, and the factor beyond the tables (each further scale divides by √2, 2 or √8)."""

import math

MADFM_TO_SIGMA = 0.6744888
WEIGHTS = {
    "b3spline": [1 / 16, 4 / 16, 6 / 16, 4 / 16, 1 / 16],
    "triangle": [1 / 4, 2 / 4, 1 / 4],
    "haar": [0.0, 1 / 2, 1 / 2],
}
# The first entries of DUCHAMP's tables (enough for the sizes tested here, which stay below the
# scales where the tables' own quirks sit; test_atrous_duchamp checks those through atrous_scales).
FACTORS = {
    "b3spline": {
        1: [1.0, 0.723489806, 0.285450405, 0.177947535, 0.122223156, 0.0858113122],
        2: [1.0, 0.890796310, 0.200663851, 0.0855075048, 0.0412474444, 0.0204249666],
        3: [1.0, 0.956543592, 0.120336499, 0.0349500154, 0.0118164242, 0.00413233507],
    },
    "triangle": {
        1: [1.0, 0.612372436, 0.330718914, 0.211947812, 0.145740298, 0.102310944],
        2: [1.0, 0.800390530, 0.272878894, 0.119779282, 0.0577664785, 0.0286163283],
        3: [1.0, 0.8959544490, 0.192033014, 0.0576484078, 0.0194912393, 0.006812783870],
    },
    "haar": {
        1: [1.0, 0.707167810, 0.5, 0.353553391, 0.25, 0.176776695, 0.125],
        2: [1.0, 0.433012702, 0.216506351, 0.108253175, 0.0541265877, 0.0270632939, 0.0135316469],
        3: [1.0, 0.935414347, 0.330718914, 0.116926793, 0.0413398642, 0.0146158492],
    },
}


def n_scales(length: int, filt: str) -> int:
    lg = math.floor(math.log2(length - 1))
    return lg - 1 if filt == "b3spline" else lg


def factor(filt: str, dim: int, s: int) -> float:
    table = FACTORS[filt][dim]
    if s < len(table):
        return table[s]
    return factor(filt, dim, s - 1) / {1: math.sqrt(2), 2: 2.0, 3: math.sqrt(8)}[dim]
