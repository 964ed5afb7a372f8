"""make demo-llm: llm-server (tp 2 x pp 2 process actors) on a free loopback
port, one streamed completion with curl and one with the openai client, each
checked token for token against the single-process reference (llm-gen), a
short transcript, then SIGTERM and a check that the server exits 0."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BUILD = os.environ.get("LLM_BUILD", "build")
LLM = os.path.join(BUILD, "examples", "llm")
SEED, TP, PP = 3, 2, 2


def reference(prompt, n):
    out = subprocess.run([f"{LLM}/llm-gen", "--seed", str(SEED), "--prompt-ids", ",".join(map(str, prompt)),
                          "--max-tokens", str(n), "--tp", str(TP)], capture_output=True, text=True, check=True)
    return [int(t) for t in out.stdout.split("\n")[-2].split()]


def show(tokens):
    return bytes(tokens).decode("latin-1").encode("unicode_escape").decode()


def check(who, got, want):
    ok = got == want
    print(f"  {who}: {len(got)} tokens {'equal to' if ok else 'DIFFERENT from'} the reference: \"{show(got)}\"")
    if not ok:
        print(f"    got  {got}\n    want {want}")
    return ok


def main():
    err = tempfile.TemporaryFile(mode="w+")
    out = tempfile.TemporaryFile(mode="w+")
    cmd = [f"{LLM}/llm-server", "--port", "0", "--seed", str(SEED), "--tp", str(TP), "--pp", str(PP)]
    print("$ " + " ".join(cmd))
    srv = subprocess.Popen(cmd, stdout=out, stderr=err)
    deadline, url = time.monotonic() + 60, None
    while not url:
        out.seek(0)
        m = re.search(r"listening on (http://\S+)", out.read())
        url = m and m.group(1)
        if srv.poll() is not None or time.monotonic() > deadline:
            err.seek(0)
            sys.exit(f"demo-llm: the server did not start: {err.read()}")
        time.sleep(0.05)
    out.seek(0)
    print("  " + out.read().strip().replace("\n", "\n  "))
    ok = True
    try:
        prompt = "The quick brown fox"
        body = json.dumps({"model": "adag-llm", "prompt": prompt, "max_tokens": 24, "stream": True})
        print(f"\n$ curl -N {url}/v1/completions -d '{body}'")
        if shutil.which("curl"):
            sse = subprocess.run(["curl", "-sSN", f"{url}/v1/completions", "-H", "Content-Type: application/json",
                                  "-d", body], capture_output=True, text=True, timeout=120, check=True).stdout
            events = [ln[6:] for ln in sse.split("\n") if ln.startswith("data: ")]
            for e in events[:2] + ["..."] + events[-2:]:
                print("  " + (f"data: {e}" if e != "..." else e))
            tokens = [t for e in events[:-1] for t in json.loads(e)["choices"][0]["token_ids"]]
            ok &= check("curl", tokens, reference(prompt.encode(), 24))
        else:
            print("  skipped: curl not found")
        print("\n$ python3 -c 'openai.OpenAI(base_url=...).completions.create(..., stream=True)'")
        try:
            import openai
        except ImportError:
            openai = None
            print("  skipped: the openai package is not installed (pip install openai)")
        if openai:
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
            ids = list(b"Hello, adag")
            tokens = []
            for chunk in client.completions.create(model="adag-llm", prompt=ids, max_tokens=32, stream=True):
                tokens += chunk.choices[0].model_extra["token_ids"]
            ok &= check("openai", tokens, reference(bytes(ids), 32))
    finally:
        print("\n$ kill -TERM <server>")
        srv.send_signal(signal.SIGTERM)
        rc = srv.wait(120)
        err.seek(0)
        print("  " + err.read().strip().replace("\n", "\n  "))
        print(f"  exit status {rc}")
    if rc != 0 or not ok:
        sys.exit("demo-llm: FAILED")
    print("demo-llm: ok")


if __name__ == "__main__":
    main()
