"""The text sequence diagram ``joynr-sim trace --msg`` prints for a conversation: one
lifeline per runtime, one row per hop or decision, what happened at a lifeline marked on
it and told on the right.

Only the drawing lives here; which hops a message took and in what order is
``joynr_sim.message_path``'s, so the terminal and the report draw the same path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rich.text import Text

from .message_path import Conversation, Event, Hop, hop_label


class TextDiagram:
    """Lifelines side by side, each as wide as the widest runtime id or hop label needs;
    the gutter on the left holds a row's hop counter and time."""

    GUTTER = 14

    def __init__(self, columns: list[str], labels: Iterable[str]) -> None:
        self.columns = columns
        self.width = max([12, *(len(c) + 4 for c in columns), *(len(t) + 6 for t in labels)])
        self.rows: list[Text] = []

    def center(self, col: int) -> int:
        return self.GUTTER + col * self.width + self.width // 2

    def _base(self, gutter: str) -> list[str]:
        chars = list(gutter[: self.GUTTER - 1].ljust(self.GUTTER) + " " * self.width * len(self.columns))
        for c in range(len(self.columns)):
            chars[self.center(c)] = "│"
        return chars

    def _row(self, chars: list[str], note: str, style: str) -> None:
        line = "".join(chars).rstrip()
        if note:
            line = f"{line.ljust(self.GUTTER + self.width * len(self.columns))}  {note}"
        self.rows.append(Text(line, style=style))

    def header(self) -> Text:
        chars = list(" " * (self.GUTTER + self.width * len(self.columns)))
        for c, name in enumerate(self.columns):
            start = self.center(c) - len(name) // 2
            chars[start:start + len(name)] = name
        return Text("".join(chars).rstrip(), style="bold")

    def arrow(self, gutter: str, src: int | None, dst: int | None, label: str, note: str = "",
              style: str = "") -> None:
        chars = self._base(gutter)
        if src is not None and dst is not None and src != dst:
            a, b = sorted((self.center(src), self.center(dst)))
            span = list("─" * (b - a - 1))
            text = f" {label} "
            at = (len(span) - len(text)) // 2
            span[at:at + len(text)] = text
            if dst > src:
                span[-1] = "▶"
            else:
                span[0] = "◀"
            chars[a + 1:b] = span
        else:
            # to its own topic, or a hop whose other end left no trace
            c = self.center(src if src is not None else dst or 0)
            chars[c] = "↺" if src == dst else "▷" if dst is None else "▶"
            note = f"{label}: {note}" if note else label
        self._row(chars, note, style)

    def mark(self, gutter: str, col: int, symbol: str, note: str, style: str = "") -> None:
        chars = self._base(gutter)
        chars[self.center(col)] = symbol
        self._row(chars, note, style)


def sequence_diagram(conv: Conversation, rel: Callable[[Event], str]) -> list[Text]:
    """The header line of lifelines, then per message its title and a row per hop or
    decision; ``rel`` writes an event's time in the gutter."""
    col = {rt: i for i, rt in enumerate(conv.runtimes)}
    # wide enough for the label of every send and receipt, also of those without a row of
    # their own (an in-process hand-over, a send drawn at its receipt)
    diagram = TextDiagram(conv.runtimes, (hop_label(e) for p in conv.paths for e in p.events
                                          if e["ev"] in ("msg.out", "msg.in")))
    for path in conv.paths:
        head = path.head
        diagram.rows.append(Text(
            f"{head.get('type')} {path.msg}  {head.get('from')} → {head.get('to')}"
            + (f"  corr {head['corr']}" if head.get("corr") else ""), style="bold cyan"))
        for step in path.steps:
            e = step.at
            gutter = f"h{e.get('hops')} {rel(e)}"
            rt = e["rt"]
            if isinstance(step, Hop):
                if step.sent is None:
                    diagram.arrow(gutter, None, col[rt], step.label,
                                  note=f"received at {rt}, sender left no msg.out", style="yellow")
                elif step.received is None:
                    diagram.arrow(gutter, col[rt], None, step.label,
                                  note=f"sent by {rt} to {e.get('target')}, never received", style="yellow")
                else:
                    diagram.arrow(gutter, col[step.sent["rt"]], col[rt], step.label)
            elif step.kind == "deliver":
                diagram.mark(gutter, col[rt], "●", f"deliver at {rt} to {e.get('to')}")
            elif step.kind == "queue":
                diagram.mark(gutter, col[rt], "◌", f"queue at {rt}: {e.get('reason')}", style="yellow")
            else:
                diagram.mark(gutter, col[rt], "✗", f"drop at {rt}: {e.get('reason')}", style="bold red")
        diagram.rows.append(Text(""))
    if conv.unanswered:
        diagram.rows.append(Text("no reply in the trace", style="yellow"))
    return [diagram.header(), *diagram.rows]
