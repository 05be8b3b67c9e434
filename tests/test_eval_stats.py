"""Match statistics (issue 13's arena and gating math): hand-computed goldens."""

import math

import pytest

from moozi.eval import stats


def test_score_interval_golden():
    # 6 wins, 2 draws, 2 losses: s = 0.7; per-game variance (6 x 0.3^2 + 2 x 0.2^2 + 2 x 0.7^2) / 10 = 0.16;
    # se = sqrt(0.16 / 10) = 0.126491; half-width 1.959964 x 0.126491 = 0.247918
    iv = stats.score_interval(6, 2, 2)
    assert (iv.value, iv.low, iv.high) == (pytest.approx(0.7), pytest.approx(0.452082, abs=1e-6),
                                           pytest.approx(0.947918, abs=1e-6))
    assert stats.score_interval(0, 0, 0) == stats.Interval(0.5, 0.0, 1.0)
    assert stats.score_interval(10, 0, 0).high == 1.0  # clipped to the possible range


def test_elo_golden():
    assert stats.elo_from_score(0.75) == pytest.approx(400 * math.log10(3))  # 190.849
    assert stats.elo_from_score(0.5) == 0.0 and stats.elo_from_score(1.0) == math.inf
    assert stats.score_from_elo(stats.elo_from_score(0.3)) == pytest.approx(0.3)
    iv = stats.elo_interval(stats.Interval(0.5, 0.25, 0.75))
    assert (iv.low, iv.high) == (pytest.approx(-190.849, abs=1e-3), pytest.approx(190.849, abs=1e-3))


def test_pair_score_interval_golden():
    # pairs 1, 1/2, 3/4, 1/4: mean 0.625, population std sqrt(0.078125) = 0.279508; half 1.959964 x 0.279508 / 2
    iv = stats.pair_score_interval([1.0, 0.5, 0.75, 0.25])
    assert (iv.value, iv.low, iv.high) == (pytest.approx(0.625), pytest.approx(0.351087, abs=1e-6),
                                           pytest.approx(0.898913, abs=1e-6))


def test_sprt_golden():
    # Pentanomial maximum likelihood with mean s (no pseudo-counts): pairs 1, 1, 1/2, 1 put their mass on
    # {1/2, 1}, where a mean s means p(1) = 2s - 1, p(1/2) = 2 - 2s. Between 50 Elo (s0 = 0.571463) and
    # 100 Elo (s1 = 0.640065): p0 = (0.857074, 0.142926), p1 = (0.719870, 0.280130), and
    # LLR = 4 (1/4 ln(0.719870 / 0.857074) + 3/4 ln(0.280130 / 0.142926)) = 4 (-0.043614 + 0.504695) = 1.844322.
    x = [1.0, 1.0, 0.5, 1.0]
    assert stats.sprt_llr_counts(stats.pair_counts(x), 50.0, 100.0, pseudo=0.0) == pytest.approx(1.844322, abs=1e-5)
    # With the pseudo-counts every outcome stays possible (a loss-loss pair too), which keeps the ratio
    # cautious after few pairs; many such pairs still decide.
    assert 0.0 < stats.sprt_llr(x, 50.0, 100.0) < 1.844322
    assert stats.sprt_llr(x * 25, 50.0, 100.0) > stats.sprt_bounds()[1]
    # Symmetry: swapping the hypotheses negates the ratio.
    assert stats.sprt_llr(x, 100.0, 50.0) == pytest.approx(-stats.sprt_llr(x, 50.0, 100.0), abs=1e-9)
    lo, hi = stats.sprt_bounds(0.05, 0.05)
    assert (lo, hi) == (pytest.approx(-2.944439, abs=1e-6), pytest.approx(2.944439, abs=1e-6))
    assert stats.sprt_decision(x * 3, 0.0, 100.0) == "H1"
    assert stats.sprt_decision([0.0, 0.5, 0.0, 0.25] * 3, 0.0, 100.0) == "H0"
    assert stats.sprt_decision([0.5, 0.75], 0.0, 100.0) == "continue"


def test_hoeffding_games_golden():
    assert stats.hoeffding_games(0.05, 0.05) == 738  # ln(40) / (2 x 0.05^2) = 737.78
    with pytest.raises(ValueError, match="margin"):
        stats.hoeffding_games(0.0, 0.05)


def _games(first, second, wins, draws, losses):
    return [(first, second, 1.0)] * wins + [(first, second, 0.5)] * draws + [(first, second, 0.0)] * losses


def test_ratings_golden_two_players():
    from moozi.eval.ratings import LN10_400, fit_ratings

    # A beats the anchor 30 times in 40, seats balanced: r = 400 log10(30 / 10) = 190.85 Elo, first move 0;
    # sd = 1 / sqrt(n p (1 - p)) / (ln 10 / 400) = 1 / sqrt(40 x 0.75 x 0.25) / 0.0057565 = 63.43 Elo
    games = _games("A", "random", 15, 0, 5) + _games("random", "A", 5, 0, 15)
    r = fit_ratings(games, anchor="random", prior_sd=1e6)
    assert r.ratings["A"] == pytest.approx(400 * math.log10(3), abs=0.5) and r.ratings["random"] == 0.0
    assert r.first_move == pytest.approx(0.0, abs=0.5) and r.draw_width == 0.0
    assert r.sd["A"] == pytest.approx(1 / math.sqrt(40 * 0.75 * 0.25) / LN10_400, rel=0.01)
    lo, hi = r.interval("A")
    assert lo < r.ratings["A"] < hi


def test_ratings_separate_first_move_and_draws():
    from moozi.eval.ratings import fit_ratings

    # equal players; whoever moves first wins 3 in 4 (no draws): first-move term 400 log10(3) = 190.85
    games = _games("A", "random", 15, 0, 5) + _games("random", "A", 15, 0, 5)
    r = fit_ratings(games, anchor="random", prior_sd=1e6)
    assert r.ratings["A"] == pytest.approx(0.0, abs=0.5) and r.first_move == pytest.approx(190.85, abs=0.5)
    drawn = fit_ratings(_games("A", "random", 10, 20, 10) + _games("random", "A", 10, 20, 10), anchor="random")
    assert drawn.ratings["A"] == pytest.approx(0.0, abs=0.5) and drawn.draw_width > 0
    with pytest.raises(ValueError, match="anchor"):
        fit_ratings(games, anchor="perfect")


def test_ratings_agree_with_openspiel():
    """Three players, no draws, seats balanced: the same rating differences as OpenSpiel's Elo."""
    pyspiel = pytest.importorskip("pyspiel")
    from moozi.eval.ratings import fit_ratings

    wins = {("A", "random"): (16, 4), ("B", "random"): (12, 8), ("A", "B"): (13, 7)}
    games = []
    for (p, q), (w, l_) in wins.items():
        games += _games(p, q, w // 2, 0, l_ // 2) + _games(q, p, l_ - l_ // 2, 0, w - w // 2)
    ours = fit_ratings(games, anchor="random", first_move=False, prior_sd=1e6).ratings
    names = ["A", "B", "random"]
    matrix = [[0] * 3 for _ in range(3)]
    for (p, q), (w, l_) in wins.items():
        matrix[names.index(p)][names.index(q)] += w
        matrix[names.index(q)][names.index(p)] += l_
    theirs = pyspiel.elo.compute_ratings_from_matrices(matrix)
    for n in ("A", "B"):
        assert ours[n] == pytest.approx(theirs[names.index(n)] - theirs[2], abs=3.0)


def test_wilson_interval_golden():
    # 0 of 20: the upper end is z^2 / (n + z^2) = 3.841459 / 23.841459.
    low, high = stats.wilson_interval(0, 20)
    assert low == 0.0 and high == pytest.approx(0.161125, abs=1e-6)
    # 5 of 10: centre 1/2, half-width z sqrt(1/40 + z^2/400) / (1 + z^2/10) = 0.3645936 / 1.3841459 = 0.263407.
    assert stats.wilson_interval(5, 10) == pytest.approx((0.236593, 0.763407), abs=1e-6)
    assert stats.wilson_interval(0, 0) == (0.0, 1.0)


def test_pair_interval_of_identical_pairs_is_not_empty():
    # 20 pairs all lost: a normal interval would be [0, 0]; the pairs count as 20 trials instead.
    iv = stats.pair_score_interval([0.0] * 20)
    assert (iv.value, iv.low) == (0.0, 0.0) and iv.high == pytest.approx(0.161125, abs=1e-6)


def test_sprt_error_rates_in_simulation():
    """2,000 simulated SPRTs at each hypothesis (0 vs 50 Elo, 20% draws): both error rates at 0.05 within
    three standard errors."""
    from moozi.eval.gating import sprt_error_rates

    r = sprt_error_rates(0.0, 50.0, runs=2000, seed=0)
    se = math.sqrt(0.05 * 0.95 / 2000)
    assert abs(r["at_h0"]["accept_h1"] - 0.05) <= 3 * se, r
    assert abs((1.0 - r["at_h1"]["accept_h1"]) - 0.05) <= 3 * se, r
    assert r["at_h0"]["undecided"] == r["at_h1"]["undecided"] == 0.0


def test_gating_rules():
    from moozi.eval import gating

    assert gating.sprt_sequence([1.0, 0.75] * 20, 0.0, 100.0)[0] == "H1"
    assert gating.sprt_sequence([0.5] * 3, 0.0, 100.0)[0] == "continue"
    # Hoeffding at margin 0.05, delta 0.05: 738 games = 369 pairs before deciding.
    assert gating.hoeffding_decision([0.75] * 100, 0.05, 0.05) == ("continue", 738)
    assert gating.hoeffding_decision([0.75] * 369, 0.05, 0.05) == ("H1", 738)
    assert gating.hoeffding_decision([0.5] * 369, 0.05, 0.05) == ("H0", 738)
    assert gating.fixed_decision([0.5, 0.75]) == "H1" and gating.fixed_decision([0.5, 0.5]) == "H0"
    # An equally strong network passes 0.55 after 40 decisive games 26% of the time (z = 0.05 / (0.5 / sqrt(40))
    # = 0.632, P(Z > 0.632) = 0.2635); after 400, 2.3%.
    assert gating.fixed_accept_rate(40) == pytest.approx(0.2635, abs=1e-3)
    assert gating.fixed_accept_rate(400) == pytest.approx(0.02275, abs=1e-4)


def test_ratings_three_players_and_an_undefeated_one():
    from moozi.eval.ratings import fit_ratings

    # A beats B 75%, B beats C 75%, A beats C 90% (seats balanced, no draws): exactly +190.8 / 0 / -190.8,
    # since 10^(381.7 / 400) = 9 makes A over C 90%.
    games = []
    for (x, y, wins) in (("A", "B", 300), ("B", "C", 300), ("A", "C", 360)):
        for i in range(400):
            first, second = (x, y) if i % 2 == 0 else (y, x)
            won = i // 2 < wins // 2  # per seat the same share
            games.append((first, second, (1.0 if won else 0.0) if first == x else (0.0 if won else 1.0)))
    r = fit_ratings(games, anchor="B", first_move=False)
    assert r.ratings["A"] == pytest.approx(190.85, abs=0.1) and r.ratings["C"] == pytest.approx(-190.85, abs=0.1)
    # A player that won every game still gets a finite rating (the weak prior), above the others.
    r = fit_ratings([("A", "B", 1.0), ("B", "A", 0.0)] * 10 + [("B", "C", 0.5)] * 4, anchor="C")
    assert math.isfinite(r.ratings["A"]) and r.ratings["A"] > r.ratings["B"] and math.isfinite(r.sd["A"])


def test_rating_intervals_cover_the_truth():
    """Simulated pools with known ratings (round robin, first-move edge, draws): the 95% intervals cover the
    true ratings 93-97% of the time."""
    import numpy as np

    from moozi.eval.ratings import LN10_400, fit_ratings

    rng = np.random.default_rng(1)
    truth = {"r": 0.0, "p1": 120.0, "p2": 260.0, "p3": 420.0}
    names = list(truth)
    hits = total = 0
    for _ in range(600):  # the three players of one pool are correlated: 300 pools gave 92-97% across seeds
        games = []
        for i, x in enumerate(names):
            for y in names[i + 1:]:
                for g in range(40):
                    first, second = (x, y) if g % 2 == 0 else (y, x)
                    z = (truth[first] - truth[second] + 40.0) * LN10_400
                    p_win, p_loss = 1 / (1 + np.exp(-(z - 0.6))), 1 / (1 + np.exp(z + 0.6))
                    u = rng.random()
                    games.append((first, second, 1.0 if u < p_win else 0.0 if u < p_win + p_loss else 0.5))
        fit = fit_ratings(games, anchor="r")
        for n in names[1:]:
            low, high = fit.interval(n)
            hits += low <= truth[n] <= high
            total += 1
    assert 0.93 <= hits / total <= 0.97, hits / total
