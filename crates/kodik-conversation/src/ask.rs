//! `ask_questions` (A6): the [`Asker`] host trait, the library-side countdown, and two
//! reference askers (scripted for tests, terminal for `kodik agent`).

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::BufRead as _;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use kodik_schema::agent::Question;
use tokio::io::AsyncWriteExt;
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

/// The lines of one input (stdin), read by one thread for the whole process and handed to
/// whoever asks next.
///
/// A read per question would outlive a question skipped by the countdown: it kept reading,
/// swallowed the answer typed to the next question, and, on tokio's blocking pool, held the
/// process open at exit until Enter was pressed. A plain thread ends with the process, and
/// lines typed before a round of questions was shown are dropped as answers to nothing.
#[derive(Debug)]
pub struct LineReader {
    lines: tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<(Instant, String)>>,
}

impl LineReader {
    /// Starts the thread reading `input` line by line until its end or an error.
    pub fn spawn(input: impl std::io::Read + Send + 'static) -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let reader = std::thread::Builder::new().name("kodik-stdin".into()).spawn(move || {
            let mut input = std::io::BufReader::new(input);
            loop {
                let mut line = String::new();
                match input.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        let line = line.trim_end_matches(['\n', '\r']).to_string();
                        if tx.send((Instant::now(), line)).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        // Without the thread there are no lines: the sender is dropped and every read finds
        // the input closed, which the asker reports as "cannot be asked".
        drop(reader);
        Self { lines: tokio::sync::Mutex::new(rx) }
    }

    /// The process's stdin, shared by every [`TerminalAsker`].
    pub fn stdin() -> &'static LineReader {
        static STDIN: OnceLock<LineReader> = OnceLock::new();
        STDIN.get_or_init(|| LineReader::spawn(std::io::stdin()))
    }

    /// The next line finished at or after `since`; `None` when the input has ended. Dropping
    /// the future leaves the line for the next caller.
    pub async fn next_after(&self, since: Instant) -> Option<String> {
        let mut lines = self.lines.lock().await;
        loop {
            let (at, line) = lines.recv().await?;
            if at >= since {
                return Some(line);
            }
        }
    }
}

#[async_trait]
impl Asker for TerminalAsker {
    async fn ask(&self, questions: &[Question], interaction: Interaction) -> Result<Vec<Answer>, AskError> {
        let unavailable = |e: std::io::Error| AskError::Unavailable(e.to_string());
        let shown = Instant::now();
        let lines = LineReader::stdin();
        let mut err = tokio::io::stderr();
        let mut answers = Vec::with_capacity(questions.len());
        for (i, q) in questions.iter().enumerate() {
            err.write_all(Self::format(i, q).as_bytes()).await.map_err(unavailable)?;
            err.flush().await.map_err(unavailable)?;
            let Some(line) = lines.next_after(shown).await else {
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

    /// A6: a question skipped by the countdown leaves no read behind that swallows the answer
    /// to the next question or keeps the process from ending.
    #[test]
    fn a6_a_skipped_question_neither_swallows_the_next_answer_nor_holds_the_process_open() {
        let (read, mut write) = std::io::pipe().unwrap();
        let reader = std::sync::Arc::new(LineReader::spawn(read));
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let r = std::sync::Arc::clone(&reader);
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
            let first = rt.block_on(async {
                tokio::time::timeout(Duration::from_millis(50), r.next_after(Instant::now())).await
            });
            // The runtime ends while nobody has typed anything: it must not wait for the input.
            drop(rt);
            done_tx.send(first.is_err()).unwrap();
        });
        let timed_out = done_rx.recv_timeout(Duration::from_secs(20)).expect("the runtime waited for stdin at exit");
        assert!(timed_out, "nothing was typed, so the first question timed out");

        use std::io::Write as _;
        // A line typed before the next round of questions answers nothing ...
        writeln!(write, "late for the first").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let shown = Instant::now();
        // ... and the answer typed to the next question reaches it.
        writeln!(write, "2").unwrap();
        let next = rt.block_on(async { tokio::time::timeout(Duration::from_secs(20), reader.next_after(shown)).await });
        assert_eq!(next.unwrap().as_deref(), Some("2"));
        drop(write);
        let end = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(20), reader.next_after(Instant::now())).await });
        assert_eq!(end.unwrap(), None, "the input ended");
    }
}
