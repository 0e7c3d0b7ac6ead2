//! How a claim's figure from a run compares with the paper's: the verdicts and the rules that give them.

use serde::{Deserialize, Serialize};

/// How large a change is, comparably for increases and reductions: an increase by p % is p/100, a reduction
/// is compared as the increase of the inverse (halving is 1, like doubling; -92.8 % is a 13.9x speedup, 12.9).
/// Percent changes alone would call -99.1 % (111x) within 1.5x of -92.8 % (13.9x).
pub(super) fn magnitude(change_pct: f64) -> f64 {
    if change_pct >= 0.0 {
        change_pct / 100.0
    } else {
        100.0 / (100.0 + change_pct).max(0.0) - 1.0
    }
}

/// How a run's figure compares with the paper's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The same direction, and the change's magnitude (see `magnitude`) within 1.5x of the paper's either way
    /// (for a claim of no change: within 5 %).
    Reproduced,
    /// The same direction, but more than 1.5x larger or smaller.
    Direction,
    NotReproduced,
    /// The run did not measure the points the claim compares (a quick sweep).
    NotMeasured,
    /// The paper's stated setup cannot give its figure (the claim's `setup-cannot-produce` says why), and the
    /// run does not reproduce it either.
    NotReproducibleFromSetup,
    /// The series is a stand-in that bounds the paper's setup from above (the claim's `upper-bound` says how): its
    /// figure bounds the effect and is no evidence of its direction.
    UpperBound,
}

/// A claim of "no change" is met by a change smaller than this, in percent.
pub(super) const NO_CHANGE_PCT: f64 = 5.0;
/// How far from the paper's change a reproduced figure may be, as a factor either way.
const WITHIN_FACTOR: f64 = 1.5;
/// Beyond this factor either way a change in the paper's direction is not reproduced: it is another effect.
const FAR_FACTOR: f64 = 5.0;

impl Verdict {
    /// The verdict for a model's change against the paper's, both in percent.
    pub fn judge(paper_pct: f64, model_pct: Option<f64>) -> Verdict {
        let Some(model) = model_pct else { return Verdict::NotMeasured };
        if paper_pct.abs() < 1.0 {
            return if model.abs() <= NO_CHANGE_PCT { Verdict::Reproduced } else { Verdict::NotReproduced };
        }
        if model * paper_pct <= 0.0 {
            return Verdict::NotReproduced;
        }
        let ratio = magnitude(model) / magnitude(paper_pct);
        if (1.0 / WITHIN_FACTOR..=WITHIN_FACTOR).contains(&ratio) {
            Verdict::Reproduced
        } else if (1.0 / FAR_FACTOR..=FAR_FACTOR).contains(&ratio) {
            Verdict::Direction
        } else {
            Verdict::NotReproduced
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::Direction => "direction only",
            Verdict::NotReproduced => "not reproduced",
            Verdict::NotMeasured => "not measured",
            Verdict::NotReproducibleFromSetup => "not reproducible from the paper's stated setup",
            Verdict::UpperBound => "upper bound only",
        }
    }

    /// The verdict for a model's change against a paper's claim that the change is at least `paper_pct` (that
    /// something "does not help" is at least no change): met down to `NO_CHANGE_PCT` below it.
    pub fn judge_at_least(paper_pct: f64, model_pct: Option<f64>) -> Verdict {
        match model_pct {
            None => Verdict::NotMeasured,
            Some(model) if model >= paper_pct - NO_CHANGE_PCT => Verdict::Reproduced,
            Some(_) => Verdict::NotReproduced,
        }
    }

    /// The verdict for a value: within 1.5x of the paper's either way, or not.
    pub fn judge_value(paper: f64, model: Option<f64>) -> Verdict {
        match model {
            None => Verdict::NotMeasured,
            Some(model) if paper > 0.0 && (1.0 / WITHIN_FACTOR..=WITHIN_FACTOR).contains(&(model / paper)) => {
                Verdict::Reproduced
            }
            Some(_) => Verdict::NotReproduced,
        }
    }

    /// The verdict with the figures behind it: how large the model's change is against the paper's.
    pub(super) fn detail(self, paper_pct: f64, model_pct: Option<f64>) -> String {
        match (self, model_pct) {
            (Verdict::NotMeasured, _) | (_, None) => "not measured: the sweep lacks these points".to_string(),
            (_, Some(model)) if paper_pct.abs() < 1.0 => {
                format!("{}: {model:+.1} % against no change (within {NO_CHANGE_PCT} % counts)", self.name())
            }
            (Verdict::NotReproduced, Some(model)) if model.abs() < 0.05 => format!("{}: no change", self.name()),
            (Verdict::NotReproduced, Some(model)) if model * paper_pct <= 0.0 => {
                format!("{}: the opposite direction", self.name())
            }
            (Verdict::NotReproduced, Some(model)) => format!(
                "{}: {:.1}x the paper's change, beyond {FAR_FACTOR}x either way",
                self.name(),
                magnitude(model) / magnitude(paper_pct)
            ),
            (_, Some(model)) if paper_pct < 0.0 => format!(
                "{}: {:.2}x the paper's change (as speedups: {:.3}x against {:.3}x)",
                self.name(),
                magnitude(model) / magnitude(paper_pct),
                magnitude(model) + 1.0,
                magnitude(paper_pct) + 1.0
            ),
            (_, Some(model)) => format!("{}: {:.2}x the paper's change", self.name(), model / paper_pct),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_compare_direction_and_size() {
        assert_eq!(Verdict::judge(1294.0, Some(1339.7)), Verdict::Reproduced);
        assert_eq!(Verdict::judge(92.0, Some(42.1)), Verdict::Direction, "0.46x");
        assert_eq!(Verdict::judge(2.3, Some(-40.3)), Verdict::NotReproduced, "the opposite direction");
        assert_eq!(Verdict::judge(-9.95, Some(0.0)), Verdict::NotReproduced, "no change");
        assert_eq!(Verdict::judge(0.0, Some(3.0)), Verdict::Reproduced, "no change claimed, within 5 %");
        assert_eq!(Verdict::judge(0.0, Some(-8.0)), Verdict::NotReproduced);
        assert_eq!(Verdict::judge(-92.8, None), Verdict::NotMeasured);
        // Reductions compare as speedups: 13.9x against 111x is not within 1.5x, though -92.8 % and -99.1 % are.
        assert_eq!(Verdict::judge(-92.8, Some(-99.1)), Verdict::NotReproduced, "8.5x: another effect");
        assert_eq!(Verdict::judge(92.0, Some(20.0)), Verdict::Direction, "0.22x");
        assert_eq!(Verdict::judge(60.0, Some(4707.8)), Verdict::NotReproduced, "78x");
        assert_eq!(Verdict::judge(-92.8, Some(-90.0)), Verdict::Reproduced, "10x against 13.9x");
        assert_eq!(
            Verdict::judge(-50.0, Some(-100.0)),
            Verdict::NotReproduced,
            "everything removed is an infinite speedup, another effect than halving"
        );
        assert!(Verdict::Direction.detail(-92.8, Some(-99.1)).contains("as speedups: 111.111x against 13.889x"));
        // "Does not help": any change from just below none upwards.
        assert_eq!(Verdict::judge_at_least(0.0, Some(250.0)), Verdict::Reproduced);
        assert_eq!(Verdict::judge_at_least(0.0, Some(-4.0)), Verdict::Reproduced, "within the no-change margin");
        assert_eq!(Verdict::judge_at_least(0.0, Some(-30.0)), Verdict::NotReproduced, "it helped");
        assert_eq!(Verdict::judge_at_least(0.0, None), Verdict::NotMeasured);
    }
}
