"""Shared CLI plumbing: turn data errors into one-line messages with exit status 2."""

import contextlib
import os
import re
import sys

import click


class Declared(click.Choice):
    """A choice among names read when the option is used, not when the CLI is imported: an
    engine kind declared after the import (`otbench.descriptors.ENGINE_SPECS.register`) or
    installed by a distribution is a choice too."""

    def __init__(self, names):
        self._names = names
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self._names())

    @choices.setter
    def choices(self, value) -> None:      # click.Choice.__init__ sets it; the names are read
        pass


class DataError(click.ClickException):
    """A bad-input error: printed as one line (no `Error:` prefix, no traceback), exit 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(self.format_message(), file=file or sys.stderr)


@contextlib.contextmanager
def data_errors(*also: type[Exception], prefix: str = ""):
    """The CLI's one error path: otbench's errors (`OtbenchError`), `FileExistsError` and `also`
    become `DataError`.

    The message is folded onto one line: it names the file, row and rule, and
    a traceback would add nothing for a bad input. Data errors start with the
    file they name; argument errors (an `_iv` validator's `ValueError`) are
    shown with `prefix="Error: "`.
    """
    from otbench.errors import OtbenchError

    try:
        yield
    except (OtbenchError, FileExistsError, *also) as e:
        raise DataError(prefix + option_names(one_line(e))) from None


_NO_OVERWRITE = re.compile(r"\s*\(pass `overwrite`[^)]*\)")


def option_names(message: str) -> str:
    """A library message in the CLI's words: `` `probes` `` becomes `` `--probes` `` where the
    running command has that option (library validators name their keyword arguments)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None or "`" not in message:
        return message
    for p in ctx.command.params:
        longs = [o for o in getattr(p, "opts", ()) if o.startswith("--")]
        if isinstance(p, click.Option) and longs and p.name:
            message = message.replace(f"`{p.name}`", f"`{longs[0]}`")
    # A hint to pass `overwrite` that the command has no option for would name an option that is
    # not there: the command never replaces that output, so say what to do instead.
    return _NO_OVERWRITE.sub(" (this command does not replace it: give another output path)", message)


def configure_output(verbose: bool) -> None:
    """Quiet by default: third-party warnings and library log chatter are hidden.

    What a user of `otbench demo` would otherwise get: pages of Triton, NUMA,
    FutureWarning and setuptools messages from the libraries under the probe.
    otbench's own warnings stay visible. The environment variables reach the
    engine's worker processes (vLLM's engine core, Ray workers) too. With
    `--verbose` nothing is filtered.
    """
    import logging
    import warnings

    if verbose:
        # vLLM's own log (start-up, memory profile, CUDA graphs) at INFO on stderr; the engine
        # sets ERROR only where nothing else was chosen.
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO")
        return
    warnings.filterwarnings("ignore")
    warnings.filterwarnings("default", module=r"otbench(\.|$)")
    # Unclosed sockets of the engine's libraries (vLLM's zmq context) surface at our call
    # sites at garbage collection; they are not the user's to act on.
    warnings.filterwarnings("ignore", category=ResourceWarning)
    for key, value in (("PYTHONWARNINGS", "ignore"), ("VLLM_LOGGING_LEVEL", "ERROR"),
                       ("TRANSFORMERS_VERBOSITY", "error"), ("TF_CPP_MIN_LOG_LEVEL", "3"),
                       ("TOKENIZERS_PARALLELISM", "false"),
                       # torch's Python loggers (the Triton notice) and its C++ log (NUMA binding)
                       ("TORCH_LOGS", "-all"), ("TORCH_CPP_LOG_LEVEL", "ERROR")):
        os.environ.setdefault(key, value)
    for name in ("vllm", "transformers", "torch", "ray", "jax", "absl", "orbax", "numba",
                 "urllib3", "filelock", "datasets", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.ERROR)


def one_line(e: BaseException) -> str:
    """The message of `e` on one line; an OS error reads `PATH: reason` like a data error."""
    if isinstance(e, OSError) and e.strerror and e.filename is not None:
        return " ".join(f"{e.filename}: {e.strerror.lower()}".split())
    return " ".join(str(e).split())


class GuardedGroup(click.Group):
    """The command group: errors of the file system and of the data that escape a command
    (a read-only target, a refused output, a full disk) still end as one line, exit 2."""

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            raise _one_line_usage(e) from None

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        _name_usage_errors(cmd)
        super().add_command(cmd, name)

    def invoke(self, ctx):
        from otbench.errors import OtbenchError

        try:
            return super().invoke(ctx)
        except click.UsageError as e:     # a subcommand's: its usage and hint lines go too
            raise _one_line_usage(e) from None
        except BrokenPipeError as e:
            if not _stdout_gone():
                raise DataError(one_line(e)) from None
            # The reader of the output went away (`otbench plan job.toml | head`): stop quietly, as
            # Unix tools do; what is still buffered goes nowhere rather than failing again at exit
            # (Python's documented handling of EPIPE on stdout: `signal` module, "Note on SIGPIPE").
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
            raise SystemExit(1) from None
        except (OtbenchError, OSError) as e:
            raise DataError(one_line(e)) from None


def _stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader has closed it (POLLERR on its write end)."""
    import select

    try:
        fd = sys.stdout.fileno()
        p = select.poll()
        p.register(fd, select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in p.poll(0))
    except (AttributeError, ValueError, OSError):
        return False


def _name_usage_errors(cmd: click.Command) -> None:
    """`cmd` (and a group's commands, recursively) attaches its context to a usage error of its
    arguments that click's parser raises without one ("Option '--json' requires an argument."),
    so the one line names the command's --help like every other usage error."""
    if getattr(cmd, "_otbench_usage", False):
        return
    parse = cmd.parse_args

    def parse_args(ctx, args):
        try:
            return parse(ctx, args)
        except click.UsageError as e:
            if e.ctx is None:
                e.ctx = ctx
            raise
    cmd.parse_args = parse_args
    cmd._otbench_usage = True
    for sub in getattr(cmd, "commands", {}).values():
        _name_usage_errors(sub)


def _one_line_usage(e: click.UsageError) -> click.UsageError:
    """`e` shown as the one line the CLI promises (`Error: ...`, the command's --help named),
    exit 2, instead of click's usage, hint and error lines. A group given no command (click
    shows its whole help as the error) says so, with the commands it has."""
    def show(file=None) -> None:
        where = f" (see `{e.ctx.command_path} --help`)" if e.ctx is not None else ""
        message = e.format_message()
        if e.ctx is not None and isinstance(e.ctx.command, click.Group) and (
                isinstance(e, click.exceptions.NoArgsIsHelpError)
                or message.strip() == "Missing command."):
            names = e.ctx.command.list_commands(e.ctx)
            message = f"Missing command: give one of {', '.join(names)}"
        click.echo(f"Error: {' '.join(message.split())}{where}", file=file or sys.stderr)
    e.show = show
    return e


def argument_errors(*also: type[Exception]):
    """`data_errors` for commands whose validators raise `ValueError`: `Error: <rule>`, exit 2."""
    return data_errors(ValueError, *also, prefix="Error: ")


PROGRESS_SECONDS = 30.0
"""On a non-terminal, a progress line at least this often (env OTBENCH_PROGRESS_SECONDS)."""


def progress_bar(total: int, label: str):
    """Progress on stderr: a bar on a terminal, else `LineProgress` (lines for a batch log)."""
    if not sys.stderr.isatty():
        return LineProgress(total, label)
    return click.progressbar(length=total, label=label, file=sys.stderr, show_eta=True,
                             show_pos=True)


def library_progress(label: str):
    """`progress` for a library call that draws its own bar: True on a terminal, else a factory
    of `LineProgress` (timed plain lines, readable in a batch system's log)."""
    return True if sys.stderr.isatty() else (lambda total: LineProgress(total, label))


class LineProgress:
    """Plain progress lines for logs (batch systems, pipes): at least every `interval`
    seconds from a timer thread -- also while one long step runs and reports nothing --
    and one when the job is done (none when it fails: its error is the last line).
    Has the `update(n)` of click's bar."""

    def __init__(self, total: int, label: str, interval: float | None = None, file=None):
        import threading

        self.total, self.label, self.done, self.postfix = int(total), label, 0, ""
        # a callable giving the rates to show (read at every line), else the last `set_postfix`
        self.live = None
        self.interval = float(os.environ.get("OTBENCH_PROGRESS_SECONDS", PROGRESS_SECONDS)) \
            if interval is None else float(interval)
        self.file = file
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def __enter__(self):
        import time

        self._t0 = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        if exc[0] is None:
            self._line(final=True)

    def update(self, n: int) -> None:
        with self._lock:
            self.done += int(n)

    def set_postfix(self, values: dict, refresh: bool = True) -> None:
        """Rates shown after the counts on the next line (tqdm's `set_postfix`)."""
        with self._lock:
            self.postfix = ", ".join(f"{k} {v}" for k, v in values.items())

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            self._line()

    def _line(self, final: bool = False) -> None:
        import time

        with self._lock:
            done, post = self.done, self.postfix
        if self.live is not None:
            post = ", ".join(f"{k} {v}" for k, v in self.live().items())
        el = time.monotonic() - self._t0
        pct = f" ({100 * done / self.total:.0f}%)" if self.total else ""
        text = f"{self.label}: {done:,}/{self.total:,}{pct}, {el:.0f} s"
        if final:
            text += " (done)"
        elif 0 < done < self.total:
            text += f", about {el * (self.total - done) / done:.0f} s left"
        if post and not final:
            text += f" ({post})"
        click.echo(text, file=self.file or sys.stderr)


def progress_callback(bar):
    """`progress(done)` for long library calls that advances `bar` (None: no bar)."""
    state = {"done": 0}

    def update(done: int) -> None:
        if bar is not None:
            bar.update(done - state["done"])
        state["done"] = done

    return update


def load_set(path: str):
    """Load a measurement set or exit 2 with the loader's one-line message."""
    from otbench.analysis import load

    with data_errors():
        return load(path)


def write_json(obj, path, *, of=None) -> None:
    """Write JSON atomically (indent 2, sorted keys; NaN is a bug, so it raises).

    `of`: the measurement set a result was computed from; its content hash is
    recorded as `content_hash`, which binds the result to that set (the
    report refuses a result of another set).
    """
    from otbench.analysis.measurement import content_hash

    from otbench.files import dumps_indented, write_text_atomic

    if of is not None and isinstance(obj, dict):
        obj = {**obj, "content_hash": content_hash(of)}
    text = dumps_indented(obj)      # json.dumps(indent=2, sort_keys=True, allow_nan=False) text
    write_text_atomic(path, text + "\n")


RESULTS_DIR = "results"


def result_path(directory, name: str, override=None):
    """Where a command writes its result: `--json` when given, else DIRECTORY/results/<name>.

    One layout for every analysis command, the one `otbench report DIRECTORY`
    reads (`otbench.analysis.report` looks in DIRECTORY/results/).
    """
    from pathlib import Path

    return Path(override) if override is not None else Path(directory) / RESULTS_DIR / name


def write_result(doc: dict, directory, name: str, override=None):
    """Write `doc` with the set's content hash inside to `result_path(...)`; returns the path.

    The hash (`content_hash`, from the set's manifest, which `load` has
    checked) binds the result to the exact data it was computed from.
    """
    from otbench.analysis.measurement import read_manifest

    path = result_path(directory, name, override)
    with data_errors():
        content = read_manifest(directory)["content_hash"]
    write_json({**doc, "content_hash": content}, path)
    return path


def synthetic_banner(synthetic: bool) -> str:
    return "SYNTHETIC DATA (simulated, not model outputs)\n" if synthetic else ""


def memory_guard(ms, what: str, copies: int = 1) -> None:
    """Refuse, with the numbers, a frontier computation whose state exceeds available memory."""
    from otbench.analysis.frontier import state_bytes

    state, cell = state_bytes(ms)
    from otbench import resources

    need, avail = state * max(int(copies), 1), resources.available_memory()
    if avail is not None and need > avail:
        gib = 1 << 30
        per = f" x {copies} replicates in flight (--batch)" if copies > 1 else ""
        raise DataError(f"{what}: needs about {need / gib:.1f} GiB for the frontier state of cell "
                        f"{cell} ({state / gib:.2f} GiB{per}), but {avail / gib:.1f} GiB is "
                        f"available; use a set with fewer probes or trajectories per cell"
                        + (", or a smaller --batch" if copies > 1 else ""))
