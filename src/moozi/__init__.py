"""moozi: a game-playing system that plans with a learned model (MuZero family)."""

__version__ = "0.1.0"
