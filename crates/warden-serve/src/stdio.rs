//! The stdio transport's framing in front of rmcp: one JSON-RPC message per line, each line
//! bounded, and the answers JSON-RPC 2.0 owes that rmcp does not give (it drops a malformed
//! line silently).
//!
//! A reader task takes lines from stdin: a line that is not JSON (or not UTF-8) is answered
//! with `-32700 Parse error`, a JSON value that cannot be a request (a string, a number…) with
//! `-32600 Invalid Request`, both with `id: null`; a line over the size limit is answered
//! `-32600` and skipped to its end. Everything else goes on to rmcp unchanged. A writer task
//! owns stdout and writes whole lines only, rmcp's and these answers alike, so they never
//! interleave. At end of input `eof` is cancelled (calls of a vanished client stop at once).

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Buffer between the framing tasks and rmcp.
const PIPE: usize = 1 << 16;

/// The answer to a line that is not a JSON-RPC message, if it is not one.
fn refusal(line: &[u8]) -> Option<String> {
    let error = |code: i32, message: &str| {
        Some(format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{{\"code\":{code},\"message\":\"{message}\"}}}}\n"
        ))
    };
    let Ok(text) = std::str::from_utf8(line) else {
        return error(-32700, "Parse error");
    };
    let text = text.trim_start();
    if text.trim_end().is_empty() {
        return None;
    }
    // Checked for syntax only (nothing is built: rmcp parses the message itself).
    if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() {
        return error(-32700, "Parse error");
    }
    if text.starts_with(['{', '[']) {
        None
    } else {
        error(-32600, "Invalid Request")
    }
}

/// Frame `input` and `output` for rmcp: returns the reader and writer rmcp should use, and the
/// writer task, done once everything rmcp wrote is out (await it before exiting).
pub(crate) fn frame(
    input: impl AsyncRead + Unpin + Send + 'static,
    output: impl AsyncWrite + Unpin + Send + 'static,
    max_line: usize,
    eof: CancellationToken,
) -> (
    impl AsyncRead + Unpin,
    impl AsyncWrite + Unpin,
    tokio::task::JoinHandle<()>,
) {
    let (to_rmcp, rmcp_in) = tokio::io::duplex(PIPE);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(PIPE);
    let (answers, mut answered) = mpsc::unbounded_channel::<String>();
    tokio::spawn(read_lines(input, to_rmcp, answers, max_line, eof));
    let writer = tokio::spawn(async move {
        let mut output = output;
        let mut from_rmcp = BufReader::new(from_rmcp);
        let mut line = Vec::new();
        let mut rmcp_open = true;
        let mut answers_open = true;
        while rmcp_open || answers_open {
            tokio::select! {
                read = from_rmcp.read_until(b'\n', &mut line), if rmcp_open => {
                    if matches!(read, Ok(0) | Err(_)) {
                        rmcp_open = false;
                    }
                    if !line.is_empty() && write_line(&mut output, &line).await.is_err() {
                        return;
                    }
                    line.clear();
                }
                answer = answered.recv(), if answers_open => match answer {
                    Some(a) if write_line(&mut output, a.as_bytes()).await.is_err() => return,
                    Some(_) => {}
                    None => answers_open = false,
                },
            }
        }
    });
    (rmcp_in, rmcp_out, writer)
}

async fn write_line(output: &mut (impl AsyncWrite + Unpin), line: &[u8]) -> std::io::Result<()> {
    output.write_all(line).await?;
    output.flush().await
}

/// Read `input` line by line: messages to `rmcp`, refusals to `answers`.
async fn read_lines(
    input: impl AsyncRead + Unpin,
    mut rmcp: impl AsyncWrite + Unpin,
    answers: mpsc::UnboundedSender<String>,
    max_line: usize,
    eof: CancellationToken,
) {
    let mut input = BufReader::new(input);
    let limit = u64::try_from(max_line).unwrap_or(u64::MAX);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut input)
            .take(limit.saturating_add(1))
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.len() > max_line && line.last() != Some(&b'\n') {
            // Too long: answered, and the rest of it skipped.
            let _ = answers.send(
                "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\"Invalid Request: message too large\"}}\n"
                    .to_owned(),
            );
            let mut rest = Vec::new();
            loop {
                rest.clear();
                match (&mut input).take(limit).read_until(b'\n', &mut rest).await {
                    Ok(0) | Err(_) => {
                        eof.cancel();
                        return;
                    }
                    Ok(_) if rest.last() == Some(&b'\n') => break,
                    Ok(_) => {}
                }
            }
            continue;
        }
        match refusal(line.strip_suffix(b"\n").unwrap_or(&line)) {
            Some(answer) => {
                let _ = answers.send(answer);
            }
            None => {
                if rmcp.write_all(&line).await.is_err() {
                    break;
                }
            }
        }
    }
    eof.cancel();
    let _ = rmcp.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_answered_and_what_goes_on() {
        assert!(refusal(b"{not json").unwrap().contains("-32700"));
        assert!(refusal(b"\xff\xfe").unwrap().contains("-32700"));
        assert!(refusal(b"42").unwrap().contains("-32600"));
        assert!(refusal(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_none());
        assert!(refusal(b"[]").is_none(), "batches are rmcp's to judge");
        assert!(refusal(b"   ").is_none(), "blank lines are ignored");
        let answer: serde_json::Value = serde_json::from_str(&refusal(b"{").unwrap()).unwrap();
        assert_eq!(answer["id"], serde_json::Value::Null);
        assert_eq!(answer["jsonrpc"], "2.0");
    }
}
