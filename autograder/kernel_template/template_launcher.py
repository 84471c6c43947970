"""The kernel command in template mode: ask the slot's kernel template to fork a jailed kernel, relay its end.

Run by path (``python -I -S template_launcher.py SOCKET REQUEST_JSON``; standard library only):
jupyter_client starts it as it would start a kernel. It connects to the template's Unix socket,
sends the request (one JSON line, see ``template_process.py``) with its own stdout and stderr
(the grader's kernel-output pipe) as ``SCM_RIGHTS``, and waits. The template answers
``{"pid": N}`` when it forked, then ``{"exit": code, ...}`` when the jailed kernel ended; the
launcher exits with that code. When the launcher is killed (the grader's watchdog, ``stop_jail``,
a timeout), its connection closes and the template SIGKILLs the child, whose PID namespace takes
every process of the submission with it. The grader imports :func:`spawn` and :func:`wait_exit`
(the bench, the tests): one client of the protocol.
"""

import array
import json
import socket
import sys

NO_TEMPLATE = 125  # exit code: the template is not there (the grader falls back to a fresh kernel)


def spawn(sock_path, request, fds=(1, 2)):
    """Connect, send ``request`` with ``fds``; return ``(connection, reader, pid)`` once the template forked."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(sock_path)
    data = (json.dumps(request) + "\n").encode()
    conn.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", list(fds)).tobytes())])
    reader = conn.makefile("rb")
    first = json.loads(reader.readline() or b"{}")
    if "pid" not in first:
        conn.close()
        raise OSError(first.get("error", "the template closed the connection"))
    return conn, reader, int(first["pid"])


def wait_exit(reader):
    """The template's last word on the child: ``{"exit": code, "utime": s, "stime": s}`` (``{}`` if it died)."""
    line = reader.readline()
    return json.loads(line) if line else {}


def main(argv):
    try:
        conn, reader, _ = spawn(argv[1], json.loads(argv[2]))
    except OSError as e:
        sys.stderr.write(f"autograder: the kernel template is not available: {e}\n")
        return NO_TEMPLATE
    end = wait_exit(reader)
    conn.close()
    if "exit" not in end:
        sys.stderr.write("autograder: the kernel template ended before the kernel did\n")
        return NO_TEMPLATE
    return int(end["exit"])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
