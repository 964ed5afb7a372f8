"""llm-server (examples/llm/server*.c) with real clients: curl, the openai
package, http.client, raw sockets and llm-loadgen, every generated token
compared with the single-process reference (llm-gen --seed, same tp).

Run by `make test-llm` (LLM_BUILD names the build folder). A client that is
missing (curl, openai) makes its tests skip, saying why."""

import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from functools import lru_cache

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("LLM_BUILD", os.path.join(ROOT, "build"))
SERVER = os.path.join(BUILD, "examples", "llm", "llm-server")
GEN = os.path.join(BUILD, "examples", "llm", "llm-gen")
LOADGEN = os.path.join(BUILD, "examples", "llm", "llm-loadgen")
SEED = 3  # weights whose greedy output varies (seed 1 repeats one byte)
MODEL = "adag-llm"
MAX_LEN = 256  # positions per request: 16 blocks of 16
LONG = 250  # max_tokens of a request that holds a whole 16-block cache

try:
    import openai
except ImportError:
    openai = None

needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="skipped: curl not found on PATH")
needs_openai = pytest.mark.skipif(openai is None, reason="skipped: the openai package is not installed "
                                  "(pip install openai; ./setup.sh does)")


class Server:
    """llm-server on loopback, port 0; stdout/stderr in files."""

    def __init__(self, *args, seed=SEED):
        self.dir = tempfile.TemporaryDirectory(prefix="llm-server-test-")
        self.out_path = os.path.join(self.dir.name, "out")
        self.err_path = os.path.join(self.dir.name, "err")
        self.args = ["--port", "0", "--seed", str(seed), *args]
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen([SERVER, *self.args], stdout=out, stderr=err)
        deadline = time.monotonic() + 60
        while True:
            m = re.search(r"listening on http://([0-9.]+):(\d+)", self.stdout())
            if m:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                pytest.fail(f"llm-server {' '.join(self.args)} did not start (rc {self.proc.returncode}): "
                            f"{self.stderr()}")
            time.sleep(0.02)
        self.host, self.port = m.group(1), int(m.group(2))
        self.url = f"http://{self.host}:{self.port}"
        self.tp = int(args[args.index("--tp") + 1]) if "--tp" in args else 1

    def stdout(self):
        with open(self.out_path) as f:
            return f.read()

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def stop(self, timeout=60):
        """SIGTERM, then the exit status (SIGKILL and a failure past timeout)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"llm-server did not exit within {timeout} s of SIGTERM: {self.stderr()}")
        self.dir_text = self.stderr()
        self.dir.cleanup()
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.dir.cleanup()

    # ---- clients ----
    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, headers, body bytes) over http.client."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
            c.request(method, path, body=body, headers=headers or {"Content-Type": "application/json"})
            r = c.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            c.close()

    def complete(self, body):
        status, _, data = self.request("POST", "/v1/completions", body)
        return status, json.loads(data)

    def metrics(self):
        status, headers, data = self.request("GET", "/metrics")
        assert status == 200, data
        assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return parse_metrics(data.decode())


def parse_metrics(text):
    """Prometheus text: {(name, ((label, value), ..)): float}; checks that
    every sample belongs to a family declared with # HELP and # TYPE before it."""
    out, declared = {}, set()
    line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            declared.add(line.split()[2])
            continue
        if not line or line.startswith("#"):
            continue
        m = line_re.match(line)
        assert m, f"not a Prometheus sample line: {line!r}"
        name, labels = m.group(1), ()
        if m.group(3):
            labels = tuple(re.findall(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"', m.group(3)))
        family = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in declared or family in declared, f"{name}: no # TYPE line before it"
        out[(name, labels)] = float(m.group(4))
    return out


def metric(ms, name, default=None, **labels):
    """The sample name{labels}; default when absent (None: a failure)."""
    want = tuple(sorted(labels.items()))
    found = [v for (n, ls), v in ms.items() if n == name and tuple(sorted(ls)) == want]
    assert found or default is not None, f"no metric {name}{labels or ''}"
    return found[0] if found else default


def metric_sum(ms, name):
    return sum(v for (n, _), v in ms.items() if n == name)


@lru_cache(maxsize=None)
def reference(prompt, max_tokens, tp=1, weights=None, seed=SEED):
    """The single-process reference's tokens (llm-gen) for prompt (bytes)."""
    src = ["--load", weights] if weights else ["--seed", str(seed)]
    r = subprocess.run([GEN, *src, "--prompt-ids", ",".join(str(b) for b in prompt), "--max-tokens",
                        str(max_tokens), "--tp", str(tp)], capture_output=True, text=True, check=True)
    return [int(t) for t in r.stdout.strip().splitlines()[-1].split()]


def text_of(tokens):
    """A token's text: its byte as one code point (latin-1)."""
    return bytes(tokens).decode("latin-1")


def sse_events(data):
    """The data fields of an SSE stream's events, in order."""
    events = []
    for block in data.split("\n\n"):
        if not block.strip():
            continue
        lines = [ln for ln in block.split("\n") if ln.startswith("data: ")]
        assert len(lines) == 1, f"an event without exactly one data line: {block!r}"
        events.append(lines[0][len("data: "):])
    return events


def check_stream(events, want, n_prompt):
    """One token per chunk, equal to want; a last chunk with finish_reason
    'length'; then [DONE]."""
    assert events[-1] == "[DONE]", events[-3:]
    chunks = [json.loads(e) for e in events[:-1]]
    got = []
    for c in chunks[:-1]:
        ch = c["choices"][0]
        assert c["object"] == "text_completion" and c["model"] == MODEL
        assert ch["finish_reason"] is None
        assert len(ch["token_ids"]) == 1 and ch["text"] == text_of(ch["token_ids"])
        got += ch["token_ids"]
    last = chunks[-1]["choices"][0]
    assert last["finish_reason"] == "length" and last["token_ids"] == [] and last["text"] == ""
    assert len({c["id"] for c in chunks}) == 1
    assert got == want, f"stream tokens differ from the reference (prompt of {n_prompt})"


# ---- servers shared by the tests of a module: one per topology ----

@pytest.fixture(scope="module")
def servers():
    made = {}

    def get(topo):  # "2x1", or "2x2-emu": on the emulated device
        if topo not in made:
            shape, _, device = topo.partition("-")
            tp, pp = shape.split("x")
            made[topo] = Server("--tp", tp, "--pp", pp, *(["--device", device] if device else []))
        return made[topo]

    yield get
    failures = []
    for topo, s in made.items():
        rc = s.stop()
        if rc != 0:
            failures.append(f"{topo}: exit status {rc}: {s.dir_text}")
    assert not failures, failures


PROMPTS = [b"Hello", b"ab", b"The quick brown fox", b"adag serves \xc3\xb8 and \x00 bytes"]


@needs_curl
@pytest.mark.parametrize("topo", ["1x1", "2x2"])
def test_curl_stream(servers, topo):
    s = servers(topo)
    prompt = "The quick brown fox"
    with tempfile.NamedTemporaryFile() as hdr:
        r = subprocess.run(["curl", "-sSN", "--fail-with-body", "-D", hdr.name, "-X", "POST",
                            f"{s.url}/v1/completions", "-H", "Content-Type: application/json", "-d",
                            json.dumps({"model": MODEL, "prompt": prompt, "max_tokens": 40, "stream": True,
                                        "temperature": 0.7})],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr + r.stdout
        headers = open(hdr.name).read().lower()
    assert "content-type: text/event-stream" in headers, headers
    check_stream(sse_events(r.stdout), reference(prompt.encode(), 40, s.tp), len(prompt))


@needs_curl
@pytest.mark.parametrize("topo", ["1x1", "2x2"])
def test_curl_non_stream(servers, topo):
    s = servers(topo)
    prompt = list(b"ab")
    r = subprocess.run(["curl", "-sS", "--fail-with-body", f"{s.url}/v1/completions", "-H",
                        "Content-Type: application/json", "-d",
                        json.dumps({"model": MODEL, "prompt": prompt, "max_tokens": 33})],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr + r.stdout
    d = json.loads(r.stdout)
    want = reference(bytes(prompt), 33, s.tp)
    ch = d["choices"][0]
    assert d["object"] == "text_completion" and d["model"] == MODEL and d["id"].startswith("cmpl-")
    assert ch["token_ids"] == want and ch["text"] == text_of(want) and ch["finish_reason"] == "length"
    assert d["usage"] == {"prompt_tokens": 2, "completion_tokens": 33, "total_tokens": 35}


@needs_openai
@pytest.mark.parametrize("topo", ["1x1", "2x2"])
def test_openai_client(servers, topo):
    s = servers(topo)
    client = openai.OpenAI(base_url=f"{s.url}/v1", api_key="x", max_retries=0)
    # non-stream, a string prompt with non-ASCII characters (their UTF-8 bytes are the tokens)
    prompt = "adag serves ø"
    r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=24, temperature=0)
    want = reference(prompt.encode(), 24, s.tp)
    assert r.choices[0].text == text_of(want)
    assert r.choices[0].model_extra["token_ids"] == want
    assert r.choices[0].finish_reason == "length"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (len(prompt.encode()), 24)
    # stream, a prompt of token ids, usage at the end
    ids = list(b"Hello")
    got, text, finish, usage = [], "", None, None
    for chunk in client.completions.create(model=MODEL, prompt=ids, max_tokens=30, stream=True,
                                           stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            got += ch.model_extra["token_ids"]
            text += ch.text
            finish = ch.finish_reason or finish
    want = reference(bytes(ids), 30, s.tp)
    assert got == want and text == text_of(want) and finish == "length"
    assert usage is not None and usage.completion_tokens == 30 and usage.total_tokens == 35
    # an error, as the client raises it
    with pytest.raises(openai.NotFoundError) as e:
        client.completions.create(model="no-such-model", prompt="x", max_tokens=2)
    assert e.value.body["param"] == "model"
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt="x", max_tokens=0)
    assert e.value.body["param"] == "max_tokens"


@pytest.mark.parametrize("topo", ["1x1", "2x1", "1x2", "2x2", "2x1-emu"])
def test_concurrent_requests_exact(servers, topo):
    """Requests of different prompts and lengths at once, streamed and not:
    every token equal to the reference of that request alone."""
    s = servers(topo)
    jobs = [(PROMPTS[i % len(PROMPTS)] + bytes([65 + i]), [1, 7, 16, 40, 64, 100, 120, 3][i], i % 2 == 0)
            for i in range(8)]
    results = [None] * len(jobs)

    def run(i, prompt, n, stream):
        status, _, data = s.request("POST", "/v1/completions",
                                    {"model": MODEL, "prompt": list(prompt), "max_tokens": n, "stream": stream})
        results[i] = (status, data.decode("utf-8"))

    threads = [threading.Thread(target=run, args=(i, *j)) for i, j in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    for (prompt, n, stream), (status, data) in zip(jobs, results):
        assert status == 200, data
        want = reference(prompt, n, s.tp)
        if stream:
            check_stream(sse_events(data), want, len(prompt))
        else:
            assert json.loads(data)["choices"][0]["token_ids"] == want
    # the actors ran where they were asked to
    ms = s.metrics()
    devices = {(dict(ls)["actor"], dict(ls)["device"]) for (n, ls), v in ms.items()
               if n == "adag_actor_executions_total" and v > 0}
    tp, pp = (int(x) for x in topo.split("-")[0].split("x"))
    emu = topo.endswith("-emu")
    assert devices == {(f"llm_s{st}r{r}", f"emu:{st * tp + r}" if emu else "host")
                       for st in range(pp) for r in range(tp)}, devices
    assert (metric_sum(ms, "adag_dag_device_bytes") > 0) == emu


def test_models_and_health(servers):
    s = servers("1x1")
    status, headers, data = s.request("GET", "/v1/models")
    assert status == 200 and headers["Content-Type"] == "application/json"
    d = json.loads(data)
    assert d["object"] == "list" and [m["id"] for m in d["data"]] == [MODEL]
    assert d["data"][0]["object"] == "model" and d["data"][0]["max_model_len"] == MAX_LEN
    status, _, data = s.request("GET", "/health")
    assert status == 200 and json.loads(data) == {"status": "ok"}


def test_metrics(servers):
    s = servers("1x1")
    before = s.metrics()
    for n in (5, 9):
        status, d = s.complete({"model": MODEL, "prompt": "metrics", "max_tokens": n})
        assert status == 200, d
    status, _ = s.complete({"model": MODEL, "prompt": "", "max_tokens": 3})
    assert status == 400
    after = s.metrics()

    def delta(name, **labels):  # a labelled counter appears at its first count
        return metric(after, name, **labels) - metric(before, name, default=0, **labels)

    assert delta("llm_requests_total") == 2
    assert delta("llm_requests_finished_total", reason="length") == 2
    assert delta("llm_requests_rejected_total", reason="invalid") == 1
    assert delta("llm_prompt_tokens_total") == 2 * len("metrics")
    assert delta("llm_generation_tokens_total") == 14
    assert delta("llm_time_to_first_token_seconds_count") == 2
    assert delta("llm_inter_token_latency_seconds_count") == 4 + 8
    assert delta("llm_http_responses_total", code="200") >= 2  # and the first /metrics
    assert delta("llm_http_responses_total", code="400") == 1
    # histogram buckets are cumulative, +Inf equal to the count
    buckets = sorted((float(dict(ls)["le"]), v) for (n, ls), v in after.items()
                     if n == "llm_time_to_first_token_seconds_bucket")
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)
    assert buckets[-1] == (float("inf"), metric(after, "llm_time_to_first_token_seconds_count"))
    assert metric(after, "llm_kv_blocks_in_use") == 0 and metric(after, "llm_kv_blocks_total") == 256
    assert metric(after, "llm_queue_depth") == 0 and metric(after, "llm_requests_running") == 0
    assert delta("llm_steps_total", kind="prefill") >= 2 and delta("llm_steps_total", kind="decode") >= 8
    assert metric_sum(after, "llm_step_rows_total") > 0
    assert ("llm_step_padded_rows_total", ()) in after and metric(after, "llm_draining") == 0
    # adag's per-DAG figures: executions of the step DAGs add up to the steps
    steps = metric(after, "llm_steps_total", kind="prefill") + metric(after, "llm_steps_total", kind="decode")
    assert metric_sum(after, "adag_dag_executions_total") == steps
    assert metric_sum(after, "adag_dag_completed_total") == steps
    ops = {dict(ls)["actor"] for (n, ls), v in after.items() if n == "adag_op_runs_total" and v > 0}
    assert ops == {"llm_s0r0"}, ops
    assert metric_sum(after, "adag_op_runs_total") >= steps


BAD = [
    # (body, status, param, words in the message)
    ('{"model": "adag-llm", "prompt": "x",', 400, None, "not valid JSON"),
    ('[1, 2]', 400, None, "JSON object"),
    ({"prompt": "x"}, 400, "model", "'model' is missing"),
    ({"model": 7, "prompt": "x"}, 400, "model", "an integer"),
    ({"model": "gpt-4", "prompt": "x"}, 404, "model", "does not exist"),
    ({"model": MODEL}, 400, "prompt", "'prompt' is missing"),
    ({"model": MODEL, "prompt": 5}, 400, "prompt", "an integer"),
    ({"model": MODEL, "prompt": ""}, 400, "prompt", "empty"),
    ({"model": MODEL, "prompt": []}, 400, "prompt", "empty"),
    ({"model": MODEL, "prompt": [72, 256]}, 400, "prompt", "'prompt'[1]"),
    ({"model": MODEL, "prompt": ["two", "prompts"]}, 400, "prompt", "'prompt'[0]"),
    ({"model": MODEL, "prompt": "x" * 300}, 400, "prompt", "300 tokens"),
    ({"model": MODEL, "prompt": "x", "max_tokens": 0}, 400, "max_tokens", ">= 1"),
    ({"model": MODEL, "prompt": "x", "max_tokens": -3}, 400, "max_tokens", ">= 1"),
    ({"model": MODEL, "prompt": "x", "max_tokens": "5"}, 400, "max_tokens", "a string"),
    ({"model": MODEL, "prompt": "x", "max_tokens": 2.5}, 400, "max_tokens", "a number"),
    ({"model": MODEL, "prompt": "Hello", "max_tokens": 253}, 400, "max_tokens", "257 positions"),
    ({"model": MODEL, "prompt": "x", "stream": "yes"}, 400, "stream", "a boolean"),
    ({"model": MODEL, "prompt": "x", "stream": True, "stream_options": []}, 400, "stream_options", "an object"),
    ({"model": MODEL, "prompt": "x", "n": 2}, 400, "n", "must be 1"),
]


@pytest.mark.parametrize("body,status,param,words", BAD,
                         ids=[f"{b[2] or 'body'}-{i}" for i, b in enumerate(BAD)])
def test_bad_request(servers, body, status, param, words):
    s = servers("1x1")
    got, headers, data = s.request("POST", "/v1/completions", body)
    assert got == status, data
    assert headers["Content-Type"] == "application/json"
    err = json.loads(data)["error"]
    assert err["type"] == "invalid_request_error" and err["code"] is None
    assert err["param"] == param
    assert words in err["message"], err["message"]


def test_longest_request_fits(servers):
    """prompt + max_tokens - 1 == 256 positions is accepted (one past is refused above)."""
    s = servers("1x1")
    status, d = s.complete({"model": MODEL, "prompt": "Hello", "max_tokens": MAX_LEN - 4})
    assert status == 200, d
    assert d["choices"][0]["token_ids"] == reference(b"Hello", MAX_LEN - 4)


@pytest.mark.parametrize("method,path,status", [("GET", "/v1/completion", 404), ("POST", "/v2/completions", 404),
                                                ("GET", "/v1/completions", 405), ("POST", "/health", 405),
                                                ("DELETE", "/v1/models", 405), ("POST", "/metrics", 405)])
def test_bad_path_or_method(servers, method, path, status):
    s = servers("1x1")
    got, headers, data = s.request(method, path, "{}")
    assert got == status, data
    err = json.loads(data)["error"]
    assert err["type"] == "invalid_request_error" and path in err["message"]
    if status == 405:
        assert "Allow" in headers


# ---- servers of their own ----

def stream_socket(s, body):
    """A raw connection that sent a streaming request."""
    sock = socket.create_connection((s.host, s.port), timeout=60)
    data = json.dumps(body).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
    return sock


def read_until(sock, marker, limit=1 << 20):
    got = b""
    while marker not in got:
        b = sock.recv(65536)
        assert b, f"the connection closed before {marker!r}: {got[-300:]!r}"
        got += b
        assert len(got) < limit
    return got


def dechunk(raw):
    """The body of a raw chunked HTTP/1.1 response (bytes), as text."""
    head, rest = raw.split(b"\r\n\r\n", 1)
    assert b"transfer-encoding: chunked" in head.lower(), head
    body = b""
    while True:
        size, rest = rest.split(b"\r\n", 1)
        n = int(size, 16)
        if n == 0:
            return body.decode("utf-8")
        body, rest = body + rest[:n], rest[n + 2:]


def read_stream(sock, first=b""):
    """What the server sends on sock up to its last chunk."""
    return dechunk(first + read_until(sock, b"\r\n0\r\n\r\n") if b"\r\n0\r\n\r\n" not in first else first)


def wait_metrics(s, pred, what, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        ms = s.metrics()
        if pred(ms):
            return ms
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.02)


def test_disconnect_cancels():
    """A client that goes away mid-stream cancels its request: its blocks
    are freed (back to 0) and it ends 'cancelled'; so does one that goes
    while its request waits in the queue."""
    s = Server("--blocks", "16", "--tp", "2", "--pp", "2")  # one 250-token request fills the cache
    try:
        # mid-stream: read the first token, then close
        sock = stream_socket(s, {"model": MODEL, "prompt": "Hello", "max_tokens": LONG, "stream": True})
        read_until(sock, b"data: ")
        ms = s.metrics()
        assert metric(ms, "llm_kv_blocks_in_use") == 16
        sock.close()
        ms = wait_metrics(s, lambda m: metric(m, "llm_kv_blocks_in_use") == 0, "blocks freed after a disconnect")
        assert metric(ms, "llm_requests_finished_total", reason="cancelled") == 1
        assert metric(ms, "llm_requests_finished_total", reason="length") == 0
        assert metric(ms, "llm_client_disconnects_total") == 1
        assert metric(ms, "llm_generation_tokens_total") < LONG
        # queued: a request waits behind a running one; its client goes
        a = stream_socket(s, {"model": MODEL, "prompt": "Hello", "max_tokens": LONG, "stream": True})
        a_first = read_until(a, b"data: ")
        b = stream_socket(s, {"model": MODEL, "prompt": "ab", "max_tokens": 20, "stream": True})
        wait_metrics(s, lambda m: metric(m, "llm_queue_depth") == 1, "the second request queued")
        b.close()
        ms = wait_metrics(s, lambda m: metric(m, "llm_queue_depth") == 0, "the queued request cancelled")
        assert metric(ms, "llm_requests_finished_total", reason="cancelled") == 2
        assert metric(ms, "llm_kv_blocks_in_use") == 16  # the first still runs
        events = sse_events(read_stream(a, a_first))
        a.close()
        ms = wait_metrics(s, lambda m: metric(m, "llm_kv_blocks_in_use") == 0, "blocks freed after the stream")
        assert metric(ms, "llm_requests_finished_total", reason="length") == 1
        assert metric(ms, "llm_client_disconnects_total") == 2
        check_stream(events, reference(b"Hello", LONG, 2), 5)
        assert s.stop() == 0, s.dir_text
    finally:
        s.kill()


def test_overload_503():
    """--max-queue 1: with one request running and one waiting, the next
    gets 503 at once; a burst gets 503s and every 200 is exact."""
    s = Server("--blocks", "16", "--max-queue", "1")
    try:
        a = stream_socket(s, {"model": MODEL, "prompt": "Hello", "max_tokens": LONG, "stream": True})
        a_first = read_until(a, b"data: ")
        waiting = {}
        t = threading.Thread(target=lambda: waiting.update(r=s.complete(
            {"model": MODEL, "prompt": "ab", "max_tokens": 10})))
        t.start()
        wait_metrics(s, lambda m: metric(m, "llm_queue_depth") == 1, "the second request queued")
        status, d = s.complete({"model": MODEL, "prompt": "x", "max_tokens": 4})
        assert status == 503, d
        assert d["error"]["type"] == "server_error" and "queue is full" in d["error"]["message"]
        check_stream(sse_events(read_stream(a, a_first)), reference(b"Hello", LONG), 5)
        a.close()
        t.join(120)
        assert waiting["r"][0] == 200 and waiting["r"][1]["choices"][0]["token_ids"] == reference(b"ab", 10)
        # a burst of 8 long requests: at most 2 in (one running, one waiting) while the first runs
        results = [None] * 8

        def run(i):
            results[i] = s.complete({"model": MODEL, "prompt": [65 + i], "max_tokens": 200})

        threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(180)
        codes = sorted(r[0] for r in results)
        assert codes.count(503) >= 1 and codes.count(200) >= 1 and set(codes) == {200, 503}, codes
        for i, (status, d) in enumerate(results):
            if status == 200:
                assert d["choices"][0]["token_ids"] == reference(bytes([65 + i]), 200)
        ms = s.metrics()
        assert metric(ms, "llm_requests_rejected_total", reason="queue_full") == 1 + codes.count(503)
        assert metric(ms, "llm_http_responses_total", code="503") == 1 + codes.count(503)
        assert s.stop() == 0, s.dir_text
    finally:
        s.kill()


def test_sigterm_drains():
    """SIGTERM with streams running: /health and new requests get 503, the
    streams run to their end (exact), the server exits 0 and its worker
    processes are gone."""
    s = Server("--blocks", "16", "--tp", "2")  # the three requests run one after another
    try:
        socks = [stream_socket(s, {"model": MODEL, "prompt": [72, 105, i], "max_tokens": LONG, "stream": True})
                 for i in range(3)]
        first = read_until(socks[0], b"data: ")
        workers = subprocess.run(["pgrep", "-P", str(s.proc.pid)], capture_output=True, text=True).stdout.split()
        assert len(workers) >= 2, workers  # tp 2: two adag-worker processes
        s.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        while True:  # the signal's handling is asynchronous
            status, _, data = s.request("GET", "/health")
            if status == 503:
                break
            assert time.monotonic() < deadline, "still healthy 30 s after SIGTERM"
            time.sleep(0.01)
        assert json.loads(data) == {"status": "draining"}
        status, d = s.complete({"model": MODEL, "prompt": "late", "max_tokens": 2})
        assert status == 503 and "shutting down" in d["error"]["message"], d
        for i, sock in enumerate(socks):
            events = sse_events(read_stream(sock, first if i == 0 else b""))
            sock.close()
            check_stream(events, reference(bytes([72, 105, i]), LONG, 2), 3)
        rc = s.proc.wait(60)
        err = s.stderr()
        assert rc == 0, err
        assert "draining" in err and "drained" in err, err
        for pid in workers:
            assert not os.path.exists(f"/proc/{pid}") or \
                open(f"/proc/{pid}/stat").read().split()[2] == "Z", f"worker {pid} outlived the server"
    finally:
        s.kill()


def test_idle_timeout():
    """--idle-timeout 1: a request that waits in the queue longer than that
    still runs to its end (no timeout while a completion runs), and an idle
    connection, new or kept alive after a completion, is closed."""
    s = Server("--blocks", "16", "--idle-timeout", "1", "--tp", "2", "--pp", "2")
    try:
        socks = [stream_socket(s, {"model": MODEL, "prompt": [72, i], "max_tokens": LONG, "stream": True})
                 for i in range(4)]
        t0 = time.monotonic()
        for i, sock in enumerate(socks):  # one after another: the last waited for the three others
            check_stream(sse_events(read_stream(sock)), reference(bytes([72, i]), LONG, 2), 2)
        assert time.monotonic() - t0 > 1.5, "the requests ran too fast to wait past the idle timeout"
        # kept alive after a completion, then idle: closed
        c = http.client.HTTPConnection(s.host, s.port, timeout=30)
        c.request("POST", "/v1/completions", json.dumps({"model": MODEL, "prompt": "ab", "max_tokens": 2}),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200 and r.getheader("Connection", "").lower() != "close"
        r.read()
        idle = socket.create_connection((s.host, s.port), timeout=30)
        t0 = time.monotonic()
        assert c.sock.recv(1) == b"" and idle.recv(1) == b"", "an idle connection was not closed"
        assert time.monotonic() - t0 < 20
        c.close()
        idle.close()
        for sock in socks:
            sock.close()
        assert s.stop() == 0, s.dir_text
    finally:
        s.kill()


def test_worker_killed():
    """An actor's worker process killed mid-stream: the step fails, the
    stream ends with an error event and [DONE], a waiting non-stream
    request gets 500, /health says failed (503), new requests get 503, and
    SIGTERM ends the server with status 1."""
    s = Server("--blocks", "16", "--tp", "2")
    try:
        a = stream_socket(s, {"model": MODEL, "prompt": "Hello", "max_tokens": LONG, "stream": True})
        first = read_until(a, b"data: ")
        waiting = {}
        t = threading.Thread(target=lambda: waiting.update(r=s.complete(
            {"model": MODEL, "prompt": "ab", "max_tokens": 10})))
        t.start()
        wait_metrics(s, lambda m: metric(m, "llm_queue_depth") == 1, "the second request queued")
        workers = subprocess.run(["pgrep", "-P", str(s.proc.pid)], capture_output=True, text=True).stdout.split()
        assert workers, "no worker process"
        os.kill(int(workers[-1]), signal.SIGKILL)
        events = sse_events(read_stream(a, first))
        a.close()
        assert events[-1] == "[DONE]"
        err = json.loads(events[-2])["error"]
        assert err["type"] == "server_error" and "generation failed" in err["message"], err
        assert all(json.loads(e)["choices"][0]["finish_reason"] is None for e in events[:-2])
        t.join(60)
        status, d = waiting["r"]  # the queued request ends with the failure too
        assert status == 500 and d["error"]["type"] == "server_error", (status, d)
        status, _, data = s.request("GET", "/health")
        assert status == 503 and json.loads(data) == {"status": "failed"}
        status, d = s.complete({"model": MODEL, "prompt": "x", "max_tokens": 2})
        assert status == 503 and "step failed" in d["error"]["message"], d
        ms = s.metrics()
        assert metric(ms, "llm_engine_failed") == 1
        assert metric(ms, "llm_requests_finished_total", reason="error") >= 1
        assert s.stop() == 1, s.dir_text
        assert "a step had failed" in s.dir_text
    finally:
        s.kill()


def test_weights_file(tmp_path):
    """--weights: the file's weights (not the seed's), over 1x2."""
    path = str(tmp_path / "model.safetensors")
    subprocess.run([GEN, "--seed", "5", "--out", path], check=True, capture_output=True)
    s = Server("--weights", path, "--pp", "2", seed=SEED)
    try:
        status, d = s.complete({"model": MODEL, "prompt": "Hello", "max_tokens": 24})
        assert status == 200, d
        want = reference(b"Hello", 24, weights=path)
        assert want != reference(b"Hello", 24)  # the file's and the seed's weights differ
        assert d["choices"][0]["token_ids"] == want
        assert s.stop() == 0, s.dir_text
    finally:
        s.kill()


def test_cuda_device():
    """--device cuda (libllm_shard_cuda.so): tokens equal to the reference;
    skipped without the module (no nvcc at build) or a CUDA device."""
    if not os.path.exists(os.path.join(BUILD, "examples", "llm", "libllm_shard_cuda.so")):
        pytest.skip("skipped: libllm_shard_cuda.so was not built (no nvcc)")
    try:
        s = Server("--device", "cuda")
    except pytest.fail.Exception as e:
        if "this host has 0" not in str(e):
            raise
        pytest.skip(f"skipped: no CUDA device: {str(e).splitlines()[-1]}")
    try:
        status, d = s.complete({"model": MODEL, "prompt": "The quick brown fox", "max_tokens": 40})
        assert status == 200, d
        assert d["choices"][0]["token_ids"] == reference(b"The quick brown fox", 40)
        assert s.stop() == 0, s.dir_text
    finally:
        s.kill()


def test_bad_options():
    for args, words in [(["--tp", "0"], "--tp 0"), (["--tp", "3"], "tp 3 must divide"), (["--pp", "5"], "at most"),
                        (["--weights", "/nonexistent/w.safetensors"], "/nonexistent"),
                        (["--host", "localhost"], "numeric"), (["--token-budget", "48"], "token_budget 48"),
                        (["--bogus", "1"], "unknown option")]:
        r = subprocess.run([SERVER, "--port", "0", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and words in r.stderr, (args, r.returncode, r.stderr)


# ---- llm-loadgen ----

def test_loadgen_smoke(servers):
    s = servers("1x1")
    before = s.metrics()
    r = subprocess.run([LOADGEN, "--url", s.url, "--concurrency", "4", "--rate", "40", "--requests", "20",
                        "--max-tokens", "8", "--duration", "60", "--prompt", "load \"test\""],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    m = re.search(r"^requests: (\d+) sent, (\d+) ok, (\d+) errors$", out, re.M)
    assert m and m.groups() == ("20", "20", "0"), out
    m = re.search(r"^throughput: ([0-9.]+) requests/s, ([0-9.]+) tokens/s \((\d+) tokens\)$", out, re.M)
    assert m and float(m.group(1)) > 0 and float(m.group(2)) > 0 and m.group(3) == "160", out
    for what, count in (("ttft", "20 requests"), ("itl", "140 gaps")):
        m = re.search(rf"^{what}: p50 ([0-9.]+) ms, p99 ([0-9.]+) ms \({count}\)$", out, re.M)
        assert m and 0 < float(m.group(1)) <= float(m.group(2)), out
    after = s.metrics()
    assert metric(after, "llm_requests_total") - metric(before, "llm_requests_total") == 20
    assert metric(after, "llm_generation_tokens_total") - metric(before, "llm_generation_tokens_total") == 160
    # closed loop, and a request the server refuses counts as an error
    r = subprocess.run([LOADGEN, "--url", s.url + "/", "--concurrency", "2", "--requests", "4", "--max-tokens", "3",
                        "--model", "wrong"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "requests: 4 sent, 0 ok, 4 errors" in r.stdout, r.stdout
    assert "HTTP 404" in r.stdout, r.stdout


def test_loadgen_refuses_other_hosts():
    for url in ("http://10.1.2.3:8000", "http://example.com", "https://127.0.0.1:1", "not a url"):
        r = subprocess.run([LOADGEN, "--url", url, "--requests", "1"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2, (url, r.stdout, r.stderr)
        assert "--url" in r.stderr, r.stderr
