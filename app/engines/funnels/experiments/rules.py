"""What makes an experiment or a holdout well defined; the validator reports these with the
graph's other problems (rule FN-53), so a broken experiment cannot be published."""

from __future__ import annotations

from app.engines.funnels.definitions.graph import Definition, Goal, Split

RULE = "FN-53"


def experiment_problems(definition: Definition) -> list[tuple[str | None, str, str]]:
    """``(node id, field, message)`` for every problem of the definition's experiments."""
    out: list[tuple[str | None, str, str]] = []
    goals = {n.id for n in definition.nodes if isinstance(n, Goal)}
    for node in definition.nodes:
        if not isinstance(node, Split) or node.experiment is None:
            continue
        exp = node.experiment
        if (exp.goal_node is None) == (exp.goal_event is None):
            out.append(
                (node.id, "experiment", "an experiment needs one goal: a goal node or an event")
            )
        if exp.goal_node is not None and exp.goal_node not in goals:
            out.append(
                (
                    node.id,
                    "goal_node",
                    f"the experiment's goal '{exp.goal_node}' is not a goal node of this funnel",
                )
            )
        if exp.value_property is not None and exp.goal_event is None:
            out.append(
                (node.id, "value_property", "a value property needs a goal event to read it from")
            )
        if exp.value_minor and exp.goal_node is None:
            out.append((node.id, "value_minor", "a fixed conversion value needs a goal node"))
    return out
