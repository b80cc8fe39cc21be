"""Fast, independent implementation of analyze.py's report (used as the oracle and the clock)."""

import bisect
import math
import sys
from datetime import datetime, timezone


def main():
    requests, malformed = [], 0
    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split()
            if len(parts) != 7:
                malformed += 1
                continue
            try:
                ts = datetime.strptime(parts[0], "%Y-%m-%dT%H:%M:%SZ").replace(
                    tzinfo=timezone.utc).timestamp()
                requests.append((ts, parts[1], parts[3], int(parts[4]), int(parts[5])))
            except ValueError:
                malformed += 1
    clients, seen = [], set()
    sessions, last = {}, {}
    statuses = {}
    latencies, peak = {}, {}
    errors = {}
    for ts, ip, path, status, latency in requests:
        if ip not in seen:
            seen.add(ip)
            clients.append(ip)
        prev = last.get(ip)
        if prev is None or ts - prev > 1800:
            sessions[ip] = sessions.get(ip, 0) + 1
        last[ip] = ts
        statuses[status] = statuses.get(status, 0) + 1
        ep = "/".join(":id" if s.isdigit() else s for s in path.split("?", 1)[0].split("/"))
        lat = latencies.setdefault(ep, [])
        bisect.insort(lat, latency)
        if len(lat) >= 20:
            cur = lat[math.ceil(0.95 * len(lat)) - 1]
            if cur > peak.get(ep, -1):
                peak[ep] = cur
        if status >= 500:
            errors[ip] = errors.get(ip, 0) + 1
    out = [f"requests: {len(requests)}", f"malformed: {malformed}",
           f"unique clients: {len(clients)}", f"first clients: {', '.join(clients[:10])}",
           f"sessions: {sum(sessions.values())}"]
    if sessions:
        top = min(sessions, key=lambda ip: (-sessions[ip], ip))
        out.append(f"most sessions: {top} ({sessions[top]})")
    out.append("status: " + ", ".join(f"{s}={n}" for s, n in sorted(statuses.items())))
    out.append("peak p95 latency by endpoint:")
    for ep in sorted(peak):
        out.append(f"  {ep} {peak[ep]}ms ({len(latencies[ep])} requests)")
    out.append("top clients by server errors:")
    for ip in sorted(errors, key=lambda ip: (-errors[ip], ip))[:10]:
        out.append(f"  {ip} {errors[ip]}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
