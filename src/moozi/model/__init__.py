"""Learned model: value transform, history stacking, networks."""
