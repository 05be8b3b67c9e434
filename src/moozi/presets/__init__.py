"""Named configurations (YAML) per game; `moozi presets` lists them."""
