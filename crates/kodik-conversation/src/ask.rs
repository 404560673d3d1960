//! `ask_questions` (A6): the [`Asker`] host trait, the library-side countdown, and two
//! reference askers (scripted for tests, terminal for `kodik agent`).

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use kodik_schema::agent::Question;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How long questions wait untouched before they are skipped (A6).
pub const QUESTION_TIMEOUT: Duration = Duration::from_secs(60);

/// The person's answer to one question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// One or more options, by label.
    Chosen(Vec<String>),
    /// An answer in the person's own words.
    Own(String),
    /// Skipped.
    Skipped,
}

/// Why an [`Asker`] could not get answers.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// The person cannot be reached (no terminal, window closed).
    #[error("the user cannot be asked: {0}")]
    Unavailable(String),
}

/// Handed to the [`Asker`] with the questions: call [`touched`](Self::touched) on any
/// interaction (a key, a click, focus on an answer field), which stops the countdown for good.
#[derive(Debug, Clone)]
pub struct Interaction {
    touched: std::sync::Arc<watch::Sender<bool>>,
}

impl Interaction {
    fn new() -> (Self, watch::Receiver<bool>) {
        let (tx, rx) = watch::channel(false);
        (Self { touched: std::sync::Arc::new(tx) }, rx)
    }

    /// The person interacted with the questions: they are no longer skipped after the timeout.
    pub fn touched(&self) {
        self.touched.send_replace(true);
    }
}

/// Shows questions to a person and returns one answer per question, in order.
///
/// The timing is not the host's business: the library drops the future when the countdown
/// runs out untouched, or when the turn is cancelled.
#[async_trait]
pub trait Asker: Send + Sync {
    /// Asks `questions`; `interaction` reports that the person touched them.
    async fn ask(&self, questions: &[Question], interaction: Interaction) -> Result<Vec<Answer>, AskError>;
}

/// How one round of questions ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskOutcome {
    /// The person answered (some answers may be [`Answer::Skipped`]).
    Answered(Vec<Answer>),
    /// Nobody touched the questions for the whole countdown.
    TimedOut,
    /// The turn was cancelled.
    Cancelled,
}

/// Asks through `asker`, skipping everything when nobody touches the questions within
/// `timeout`. Any interaction stops the countdown; then the questions wait for the answer
/// (or the turn's cancellation).
pub async fn ask_with_countdown(
    asker: &dyn Asker,
    questions: &[Question],
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<AskOutcome, AskError> {
    let (interaction, mut touched) = Interaction::new();
    let answer = asker.ask(questions, interaction);
    tokio::pin!(answer);
    let countdown = tokio::time::sleep(timeout);
    tokio::pin!(countdown);
    let mut counting = true;
    // Once the asker drops its handle nobody can touch any more; the countdown keeps running.
    let mut watching = true;
    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => return Ok(AskOutcome::Cancelled),
            r = &mut answer => return r.map(AskOutcome::Answered),
            changed = touched.changed(), if watching && counting => match changed {
                Ok(()) if *touched.borrow() => counting = false,
                Ok(()) => {}
                Err(_) => watching = false,
            },
            _ = &mut countdown, if counting => return Ok(AskOutcome::TimedOut),
        }
    }
}

/// One scripted reaction of a [`ScriptedAsker`].
#[derive(Debug, Clone, Default)]
pub struct Reaction {
    /// Touch the questions after this long.
    pub touch_after: Option<Duration>,
    /// Answer after this long; `None` never answers.
    pub answer_after: Option<Duration>,
    /// The answers given.
    pub answers: Vec<Answer>,
}

/// An [`Asker`] that plays back [`Reaction`]s, one per call, and records what it was asked.
#[derive(Debug, Default)]
pub struct ScriptedAsker {
    script: Mutex<VecDeque<Reaction>>,
    asked: Mutex<Vec<Vec<Question>>>,
}

impl ScriptedAsker {
    /// An asker that reacts with `script`, in order.
    pub fn new(script: impl IntoIterator<Item = Reaction>) -> Self {
        Self { script: Mutex::new(script.into_iter().collect()), asked: Mutex::default() }
    }

    /// Every round of questions asked so far.
    pub fn asked(&self) -> Vec<Vec<Question>> {
        self.asked.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[async_trait]
impl Asker for ScriptedAsker {
    async fn ask(&self, questions: &[Question], interaction: Interaction) -> Result<Vec<Answer>, AskError> {
        self.asked.lock().unwrap_or_else(|p| p.into_inner()).push(questions.to_vec());
        let reaction = self.script.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
        let Some(reaction) = reaction else {
            return Err(AskError::Unavailable("the script has no more reactions".into()));
        };
        let started = tokio::time::Instant::now();
        if let Some(t) = reaction.touch_after {
            tokio::time::sleep(t).await;
            interaction.touched();
        }
        match reaction.answer_after {
            Some(t) => {
                tokio::time::sleep_until(started + t).await;
                Ok(reaction.answers)
            }
            None => std::future::pending().await,
        }
    }
}

/// An [`Asker`] on the terminal: questions on stderr, answers from stdin. The first line typed
/// counts as the interaction that stops the countdown. Per question: option numbers (`1` or
/// `1,3`), or words of one's own, or an empty line to skip.
#[derive(Debug, Default)]
pub struct TerminalAsker;

impl TerminalAsker {
    fn format(i: usize, q: &Question) -> String {
        let mut s = format!("\n[{}] {}\n", i + 1, q.question);
        for (j, o) in q.options.iter().enumerate() {
            let _ = write!(s, "  {}. {}", j + 1, o.label);
            if let Some(d) = &o.description {
                let _ = write!(s, " — {d}");
            }
            s.push('\n');
        }
        let how = if q.options.is_empty() {
            "your answer"
        } else if q.allow_multiple {
            "numbers like 1,3, or your own words"
        } else {
            "a number, or your own words"
        };
        let _ =
            write!(s, "({how}; Enter to skip; skipped for all after {} s untouched) > ", QUESTION_TIMEOUT.as_secs());
        s
    }

    /// Reads a line as an answer to `q`.
    pub fn parse(q: &Question, line: &str) -> Answer {
        let line = line.trim();
        if line.is_empty() {
            return Answer::Skipped;
        }
        let picks: Option<Vec<String>> = line
            .split(',')
            .map(|p| {
                p.trim().parse::<usize>().ok().and_then(|n| q.options.get(n.wrapping_sub(1))).map(|o| o.label.clone())
            })
            .collect();
        match picks {
            Some(p) if !p.is_empty() && (q.allow_multiple || p.len() == 1) => Answer::Chosen(p),
            _ => Answer::Own(line.to_string()),
        }
    }
}

#[async_trait]
impl Asker for TerminalAsker {
    async fn ask(&self, questions: &[Question], interaction: Interaction) -> Result<Vec<Answer>, AskError> {
        let unavailable = |e: std::io::Error| AskError::Unavailable(e.to_string());
        let mut err = tokio::io::stderr();
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        let mut answers = Vec::with_capacity(questions.len());
        for (i, q) in questions.iter().enumerate() {
            err.write_all(Self::format(i, q).as_bytes()).await.map_err(unavailable)?;
            err.flush().await.map_err(unavailable)?;
            let Some(line) = lines.next_line().await.map_err(unavailable)? else {
                return Err(AskError::Unavailable("stdin is closed".into()));
            };
            interaction.touched();
            answers.push(Self::parse(q, &line));
        }
        Ok(answers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kodik_schema::agent::QuestionOption;

    fn q(allow_multiple: bool) -> Question {
        let opt = |l: &str| QuestionOption { label: l.into(), description: None };
        Question { question: "Which?".into(), options: vec![opt("pg"), opt("sqlite"), opt("mysql")], allow_multiple }
    }

    #[test]
    fn a6_terminal_answers_by_number_own_words_or_skip() {
        assert_eq!(TerminalAsker::parse(&q(false), " 2 "), Answer::Chosen(vec!["sqlite".into()]));
        assert_eq!(TerminalAsker::parse(&q(true), "1,3"), Answer::Chosen(vec!["pg".into(), "mysql".into()]));
        // Two numbers for a single-choice question, or a number out of range, are words.
        assert_eq!(TerminalAsker::parse(&q(false), "1,3"), Answer::Own("1,3".into()));
        assert_eq!(TerminalAsker::parse(&q(false), "9"), Answer::Own("9".into()));
        assert_eq!(TerminalAsker::parse(&q(false), "0"), Answer::Own("0".into()));
        assert_eq!(
            TerminalAsker::parse(&q(false), "whichever is simplest"),
            Answer::Own("whichever is simplest".into())
        );
        assert_eq!(TerminalAsker::parse(&q(false), "   "), Answer::Skipped);
    }
}
