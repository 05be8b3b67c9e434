"""Small exact games used as true search models (tests, demo)."""
