#!/usr/bin/python3
"""A local SMTP server for tests (aiosmtpd): accepts every message on 127.0.0.1:PORT and
writes each one to DIR as N.eml (the DATA as received) and N.json (the envelope, and the
message as Python's e-mail parser reads it: headers decoded, body decoded to text).
Writes DIR/ready once it listens; runs until it is terminated.

With --tls-cert and --tls-key it offers STARTTLS and requires it before anything else; with
--auth USER:PASSWORD it requires AUTH (PLAIN or LOGIN, only inside TLS when TLS is on). Each
N.json then says whether the message came inside TLS ("tls") and who logged in ("login").

    smtp_sink.py --port 2525 --dir /tmp/mail [--tls-cert C --tls-key K] [--auth alice:s3cret]
"""
import argparse
import email
import email.policy
import json
import os
import signal
import ssl
import threading

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult


class FolderHandler:
    def __init__(self, folder):
        self.folder = folder
        self.count = 0
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):
        raw = envelope.original_content or envelope.content
        message = email.message_from_bytes(raw, policy=email.policy.default)
        body = message.get_body(preferencelist=("plain",))
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": list(envelope.rcpt_tos),
            "from": str(message["From"]),
            "to": str(message["To"]),
            "subject": str(message["Subject"]),
            "date": str(message["Date"]),
            "message_id": str(message["Message-ID"]),
            "content_type": message.get_content_type(),
            "charset": message.get_content_charset(),
            "transfer_encoding": str(message["Content-Transfer-Encoding"]),
            "body": body.get_content() if body is not None else "",
            "defects": [type(d).__name__ for d in message.defects],
            "tls": session.ssl is not None,
            "login": session.auth_data.decode() if isinstance(session.auth_data, bytes) else None,
        }
        with self.lock:
            self.count += 1
            n = self.count
        with open(os.path.join(self.folder, "%d.eml" % n), "wb") as f:
            f.write(raw)
        tmp = os.path.join(self.folder, "%d.json.tmp" % n)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(record, f, ensure_ascii=False)
        os.rename(tmp, os.path.join(self.folder, "%d.json" % n))
        return "250 Message accepted for delivery"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--auth", help="USER:PASSWORD that AUTH must give")
    args = parser.parse_args()
    options = {}
    if args.tls_cert:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        options.update(tls_context=context, require_starttls=True)
    if args.auth:
        user, password = args.auth.split(":", 1)

        def authenticate(server, session, envelope, mechanism, auth_data):
            ok = auth_data.login == user.encode() and auth_data.password == password.encode()
            return AuthResult(success=ok, auth_data=auth_data.login if ok else None)

        options.update(authenticator=authenticate, auth_required=True,
                       auth_require_tls=bool(args.tls_cert))
    controller = Controller(FolderHandler(args.dir), hostname="127.0.0.1", port=args.port,
                            decode_data=False, **options)
    controller.start()
    with open(os.path.join(args.dir, "ready"), "w") as f:
        f.write("%d\n" % args.port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    controller.stop()


if __name__ == "__main__":
    main()
