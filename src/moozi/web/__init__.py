"""``moozi serve``: a local web page to play a board game against an agent by clicking (:mod:`.server`)."""
