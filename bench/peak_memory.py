"""Peak resident memory of benchmark processes (Linux), standard library only.

In a process: `vmhwm_mb()` is the peak resident set of this process image
(VmHWM of /proc/self/status) and `reset_vmhwm()` sets it back to the
current resident set (writes 5 to /proc/self/clear_refs), so that a child
can report the peak of its timed part apart from its loading.

As a program it measures another one:

    /usr/bin/python3 -S -I bench/peak_memory.py OUT.json COMMAND [ARGS...]

runs COMMAND (stdin, stdout and stderr inherited), writes {"peak_rss_mb":
…, "polled_mb": …, "maxrss_mb": …, "floor_mb": …} to OUT.json and exits
with COMMAND's status. Two readings of the child's peak:

- `maxrss_mb`: ru_maxrss of the waited-for child. For a process that was
  forked and then exec'd, Linux reports the larger of its own peak and its
  parent's peak before the fork (the forked copy's high-water mark is kept
  in signal->maxrss at exec), which is why a bench never measures a child
  of its own large Python process this way. This program is that small
  parent: what it can carry over is at most its own peak (`floor_mb`,
  ~9 MB).
- `polled_mb`: the child's VmHWM read from /proc/PID/status every 20 ms
  while it runs (VmHWM only grows; a peak reached in the last 20 ms before
  exit can be missed).

`peak_rss_mb` is maxrss_mb when it is above the floor (then it is the
child's own peak), else polled_mb (a small child; measured for the digits
executable: maxrss 6.7 MB, polled 6.6 MB, GNU time 6.9 MB).
"""

import json
import os
import sys
import time


def vmhwm_mb(pid="self"):
    """Peak resident set of a process image in MiB (VmHWM), or None where
    /proc is not readable (or the process has exited)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def reset_vmhwm():
    """Resets VmHWM to the current resident set; False if not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def main(argv):
    if len(argv) < 3:
        print("usage: peak_memory.py OUT.json COMMAND [ARGS...]",
              file=sys.stderr)
        return 2
    out, command = argv[1], argv[2:]
    floor = vmhwm_mb() or 0.0
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    polled = 0.0
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        polled = max(polled, vmhwm_mb(pid) or 0.0)
        time.sleep(0.02)
    maxrss = usage.ru_maxrss / 1024.0
    with open(out, "w") as f:
        json.dump({"peak_rss_mb": maxrss if maxrss > 1.05 * floor
                   else polled, "polled_mb": polled, "maxrss_mb": maxrss,
                   "floor_mb": floor}, f)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code  # killed by signal -code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
