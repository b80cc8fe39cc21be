"""PostgreSQL answers run as SQL only (stdlib only, Python 3.8+; shipped in ``tests/`` with
``palaestra_harness.py`` by the tasks that use it).

No ``psql``: its meta-commands (``\\!`` runs a shell, ``\\c`` connects elsewhere, ``\\i`` reads
files) are the client's, not SQL. The checker speaks the server's protocol itself, over the
server's Unix socket in a private directory (no TCP):

* the server is made by ``initdb`` as nobody with **password** authentication
  (SCRAM-SHA-256) for every role, the superuser's password made now and kept by the checker
  (never trust: no process may connect as ``postgres`` without it);
* each case's data is loaded by the superuser into a fresh ``public`` schema, and a role of
  the case's own is made that may only log in, read that schema's tables, for
  ``statement_timeout`` (no superuser, no ``pg_read_server_files`` /
  ``pg_execute_server_program``, no membership in any role);
* the answer is sent as that role with the extended protocol: one ``Parse`` of the file's text
  (the server refuses more than one statement there), described first: a statement that
  returns no rows is refused unexecuted; its rows come back as text, capped in size.
"""

import base64
import hashlib
import hmac
import os
import socket
import struct

from palaestra_check import make_private_dir, read_regular, run_command

_MAX_ROWS_BYTES = 16 * 1024 * 1024
#: Settings that spare the throwaway server work without changing any query's result.
SERVER = (
    "-k {} -c listen_addresses='' -c fsync=off -c full_page_writes=off "
    "-c synchronous_commit=off -c autovacuum=off -c max_connections=8 "
    "-c max_worker_processes=0 -c max_wal_senders=0 -c wal_level=minimal"
)


class PgError(Exception):
    """An ErrorResponse of the server, or a protocol failure."""


class Connection:
    """One session over the server's Unix socket, as ``user`` with ``password``."""

    def __init__(self, sock_dir, user, password, database="postgres", timeout=60.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(os.path.join(sock_dir, ".s.PGSQL.5432"))
        self.buf = b""
        params = b"user\0" + user.encode() + b"\0database\0" + database.encode() + b"\0\0"
        self.sock.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
        self._authenticate(user, password)
        self._until_ready()

    def close(self):
        try:
            self.sock.sendall(b"X\0\0\0\4")
        except OSError:
            pass
        self.sock.close()

    def _send(self, kind, payload=b""):
        self.sock.sendall(kind + struct.pack("!i", len(payload) + 4) + payload)

    def _message(self):
        while True:
            if len(self.buf) >= 5:
                size = struct.unpack("!i", self.buf[1:5])[0]
                if len(self.buf) >= size + 1:
                    kind, body = self.buf[:1], self.buf[5 : size + 1]
                    self.buf = self.buf[size + 1 :]
                    return kind, body
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise PgError("the server closed the connection")
            self.buf += chunk

    def _authenticate(self, user, password):
        nonce = base64.b64encode(os.urandom(18)).decode()
        first_bare = "n=,r=" + nonce
        while True:
            kind, body = self._message()
            if kind == b"E":
                raise PgError(_error_text(body))
            if kind != b"R":
                raise PgError(f"unexpected message {kind!r} while authenticating")
            code = struct.unpack("!i", body[:4])[0]
            if code == 0:
                return
            if code == 10 and b"SCRAM-SHA-256\0" in body[4:]:
                first = ("n,," + first_bare).encode()
                self._send(b"p", b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first)
            elif code == 11:
                server_first = body[4:].decode()
                fields = dict(item.split("=", 1) for item in server_first.split(","))
                if not fields["r"].startswith(nonce):
                    raise PgError("the server's SCRAM nonce is not ours")
                salted = hashlib.pbkdf2_hmac(
                    "sha256", password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
                )
                client_key = hmac.new(salted, b"Client Key", "sha256").digest()
                final_bare = "c=biws,r=" + fields["r"]
                auth = ",".join((first_bare, server_first, final_bare)).encode()
                signature = hmac.new(hashlib.sha256(client_key).digest(), auth, "sha256").digest()
                proof = bytes(a ^ b for a, b in zip(client_key, signature))
                self._send(b"p", (final_bare + ",p=" + base64.b64encode(proof).decode()).encode())
            elif code != 12:  # 12: the server's final SCRAM message; then 0
                raise PgError(f"authentication method {code} refused: password only")

    def _until_ready(self):
        error = None
        while True:
            kind, body = self._message()
            if kind == b"E":
                error = error or _error_text(body)
            elif kind == b"Z":
                if error:
                    raise PgError(error)
                return

    def script(self, sql):
        """Run trusted SQL (any number of statements) with the simple protocol."""
        self._send(b"Q", sql.encode() + b"\0")
        self._until_ready()

    def rows(self, sql):
        """``(column names, rows of text cells)`` of ONE statement that returns rows; a NULL
        is the empty string (as ``psql -A`` prints it). Raises PgError for anything else."""
        self._send(b"P", b"\0" + sql.encode() + b"\0\0\0")
        self._send(b"D", b"S\0")
        self._send(b"S")
        columns, error = None, None
        while True:
            kind, body = self._message()
            if kind == b"E":
                error = error or _error_text(body)
            elif kind == b"T":
                columns = _columns(body)
            elif kind == b"Z":
                break
        if error:
            raise PgError(error)
        if columns is None:
            raise PgError("not a query: the statement returns no rows")
        self._send(b"B", b"\0\0" + struct.pack("!hhh", 0, 0, 0))
        self._send(b"E", b"\0" + struct.pack("!i", 0))
        self._send(b"S")
        out, size = [], 0
        while True:
            kind, body = self._message()
            if kind == b"D":
                size += len(body)
                if size > _MAX_ROWS_BYTES:
                    raise PgError(f"more than {_MAX_ROWS_BYTES} bytes of rows")
                out.append(_cells(body))
            elif kind == b"E":
                error = error or _error_text(body)
            elif kind == b"Z":
                break
        if error:
            raise PgError(error)
        return columns, out


def _error_text(body):
    fields = {}
    for part in body.split(b"\0"):
        if part:
            fields[part[:1]] = part[1:].decode("utf-8", "replace")
    return "{}: {}".format(fields.get(b"S", "ERROR"), fields.get(b"M", "?"))


def _columns(body):
    n, at, names = struct.unpack("!h", body[:2])[0], 2, []
    for _ in range(n):
        end = body.index(b"\0", at)
        names.append(body[at:end].decode())
        at = end + 1 + 18
    return names


def _cells(body):
    n, at, cells = struct.unpack("!h", body[:2])[0], 2, []
    for _ in range(n):
        size = struct.unpack("!i", body[at : at + 4])[0]
        at += 4
        if size < 0:
            cells.append("")
        else:
            cells.append(body[at : at + size].decode("utf-8", "replace"))
            at += size
    return cells


def _bin():
    import glob

    return sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))[-1]


def start_server(password):
    """initdb (password authentication only) and start a server as nobody: its socket dir."""
    sock = make_private_dir("pg-")
    os.chown(sock, 65534, 65534)
    pwfile = os.path.join(make_private_dir("pw-"), "pw")
    with open(pwfile, "w") as f:
        f.write(password + "\n")
    os.chmod(os.path.dirname(pwfile), 0o755)
    os.chmod(pwfile, 0o644)  # read by initdb (nobody): no agent process runs meanwhile
    data, binary = os.path.join(sock, "data"), _bin()
    try:
        res = run_command(
            [
                binary + "/initdb",
                "-D",
                data,
                "-U",
                "postgres",
                "-A",
                "scram-sha-256",
                "--pwfile",
                pwfile,
                "--no-sync",
                "--no-instructions",
            ],
            cwd=sock,
            timeout=180,
        )
    finally:
        os.unlink(pwfile)
    if res.ok:
        res = run_command(
            [
                binary + "/pg_ctl",
                "-D",
                data,
                "-o",
                SERVER.format(sock),
                "-w",
                "-t",
                "120",
                "-l",
                os.path.join(sock, "log"),
                "start",
            ],
            cwd=sock,
            timeout=180,
            service=True,  # the server outlives this run: the cases' queries use it
        )
    if not res.ok:
        raise SystemExit("cannot start PostgreSQL: " + res.error)
    return sock


def stop_server(sock):
    run_command(
        [_bin() + "/pg_ctl", "-D", os.path.join(sock, "data"), "-m", "immediate", "stop"],
        cwd=sock,
        timeout=60,
    )


def loading(case, role, password, timeout):
    """The superuser's SQL that loads ``case`` alone into a new public schema and makes its
    reader: log in, read the tables, nothing else."""
    return (
        "SET client_min_messages TO warning;\nDROP SCHEMA IF EXISTS public CASCADE;\n"
        "CREATE SCHEMA public;\n{load}\nCREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB "
        "NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS PASSWORD '{pw}';\n"
        "ALTER ROLE {role} SET statement_timeout = '{ms}';\n"
        "GRANT USAGE ON SCHEMA public TO {role};\n"
        "GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role};\n"
    ).format(load=case["load"], role=role, pw=password, ms=int(timeout * 1000))


def run_answer(ck, spec, cases, compare):
    """Each case loaded, then the answer's rows on it as that case's reader."""
    answer, limits = spec["answer"], spec.get("limits", {})
    timeout = limits.get("timeout", 60)
    text = read_regular(answer["file"], 1 << 20)  # never through a link the agent planted
    if text is None:
        for case in cases:
            ck.error(case["label"], "cannot read " + answer["file"])
        return
    admin_pw = os.urandom(16).hex()
    sock = start_server(admin_pw)
    try:
        admin = Connection(sock, "postgres", admin_pw, timeout=180)
        for k, case in enumerate(cases):
            role, pw = f"reader_case{k}", os.urandom(16).hex()
            admin.script(loading(case, role, pw, timeout))
            try:
                reader = Connection(sock, role, pw, timeout=timeout + 5)
                try:
                    _, got = reader.rows(text)
                finally:
                    reader.close()
            except (PgError, OSError) as e:
                ck.error(case["label"], str(e) or type(e).__name__)
                continue
            compare(case["label"], {"rows": case["want"]}, {"rows": got})
        admin.close()
    finally:
        stop_server(sock)
