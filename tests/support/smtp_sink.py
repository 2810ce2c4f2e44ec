#!/usr/bin/python3
"""A local SMTP server for tests (aiosmtpd): accepts every message on 127.0.0.1:PORT and
writes each one to DIR as N.eml (the DATA as received) and N.json (the envelope, and the
message as Python's e-mail parser reads it: headers decoded, body decoded to text).
Writes DIR/ready once it listens; runs until it is terminated.

    smtp_sink.py --port 2525 --dir /tmp/mail
"""
import argparse
import email
import email.policy
import json
import os
import signal
import threading

from aiosmtpd.controller import Controller


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
    args = parser.parse_args()
    controller = Controller(FolderHandler(args.dir), hostname="127.0.0.1", port=args.port,
                            decode_data=False)
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
