"""A team's agent service for PRBench's http_agent provider, standard library only.
Run: PRBENCH_AGENT_SECRET=<secret> python examples/http_agent.py 8080, then save
http://<host>:8080/ and the same secret as an http_agent credential."""

import hashlib, hmac, json, os, sys, time  # noqa: E401, I001 (one line: the example is 30 lines)
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = os.environ["PRBENCH_AGENT_SECRET"].encode()


def solve(task: dict) -> str:
    """Your agent: read task["problem_statement"] and task["files"] or task["archive_url"]; return a diff."""
    return ""


class Agent(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        stamp = self.headers.get("X-PRBench-Timestamp", "")
        mac = "sha256=" + hmac.new(SECRET, stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
        fresh = stamp.isdigit() and abs(time.time() - int(stamp)) < 300  # refuse replays
        signed = fresh and hmac.compare_digest(mac, self.headers.get("X-PRBench-Signature", ""))
        answer = json.dumps({"patch": solve(json.loads(body)["task"])} if signed else {"error": "bad signature"})
        self.send_response(200 if signed else 401)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(answer.encode())


ThreadingHTTPServer(("", int(sys.argv[1]) if len(sys.argv) > 1 else 8080), Agent).serve_forever()
