"""A language server that indexes for INDEX_SECONDS (argv[1]) after `initialized`: it opens a
$/progress token (after asking window/workDoneProgress/create), answers definition with []
until the work ends, then with a location. Used to test L6 readiness with a real process.
With argv[2] == "logs" it reports the work as pyright does instead, by window/logMessage:
"Searching for source files" when it starts, "Found 1 source file" when it is done."""
import json, sys, threading, time

out_lock = threading.Lock()
index_seconds = float(sys.argv[1])
by_logs = sys.argv[2:] == ["logs"]
indexed = threading.Event()


def send(msg):
    body = json.dumps(msg).encode()
    with out_lock:
        sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        sys.stdout.buffer.flush()


def read():
    length = 0
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(sys.stdin.buffer.read(length))


def log(text):
    send({"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": 3, "message": text}})


def index():
    time.sleep(index_seconds)
    indexed.set()
    if by_logs:
        log("Found 1 source file")
    else:
        send({"jsonrpc": "2.0", "method": "$/progress", "params": {"token": "idx", "value": {"kind": "end"}}})


while True:
    msg = read()
    if msg is None:
        break
    method = msg.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"capabilities": {"definitionProvider": True}}})
    elif method == "initialized":
        # The work is announced before any later request is read, like a server that starts
        # indexing on `initialized`.
        if by_logs:
            log("Searching for source files")
        else:
            send({"jsonrpc": "2.0", "id": "p1", "method": "window/workDoneProgress/create", "params": {"token": "idx"}})
            send({"jsonrpc": "2.0", "method": "$/progress", "params": {"token": "idx", "value": {"kind": "begin", "title": "Indexing"}}})
        threading.Thread(target=index, daemon=True).start()
    elif method == "textDocument/definition":
        uri = msg["params"]["textDocument"]["uri"]
        result = [{"uri": uri, "range": {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 8}}}] if indexed.is_set() else []
        send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
    elif method == "exit":
        break
    elif "id" in msg and method is not None:
        send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
