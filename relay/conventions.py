"""Span conventions (DESIGN.md §3): the attribute names the instrumentation sets and the
mapping reads. GenAI semantic-convention names are string literals here on purpose: those
conventions are still in development, and the relay must not move when a package renames
a constant.
"""

# GenAI semantic conventions
OPERATION = "gen_ai.operation.name"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
#: the user a run acts for (RELAY_AUTH=jwt or proxy): OTel's general attribute
ENDUSER_ID = "enduser.id"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"

OP_INVOKE_AGENT = "invoke_agent"
OP_CHAT = "chat"
OP_RETRIEVAL = "retrieval"
OP_GUARDRAIL = "apply_guardrail"
OP_TOOL = "execute_tool"
OP_SAVE_MESSAGE = "save_message"
#: a workflow (a graph) run, and the proposed span of one node in it (Google's ADK emits
#: both: ``invoke_workflow {name}`` with ``gen_ai.workflow.name``, ``invoke_node {name}``)
OP_INVOKE_WORKFLOW = "invoke_workflow"
OP_INVOKE_NODE = "invoke_node"
WORKFLOW_NAME = "gen_ai.workflow.name"

# relay.* fills the gaps
TURN_ID = "relay.turn.id"
RUN_KIND = "relay.run.kind"
#: on a run root, for a receiver: how many spans its trace has in all (the root
#: included), so that the receiver knows when the last has come (RELAY_OTLP_SETTLE_MS)
RUN_SPAN_COUNT = "relay.run.span_count"
GRAPH_ID = "relay.graph.id"
GRAPH_TOPOLOGY = "relay.graph.topology"
#: true at a run root's start when relay.langgraph.instrument spans the graph's nodes,
#: models and tools: the mapping then reads no other instrumentation's spans of that run
GRAPH_INSTRUMENTED = "relay.graph.instrumented"
TURN_MESSAGE = "relay.turn.message"
TURN_OUTCOME = "relay.turn.outcome"
TURN_RESPONSE = "relay.turn.response"
TURN_INTERRUPTS = "relay.turn.interrupts"
#: the ``type`` of an interrupt's value that asks the client to run a tool (its ``round``:
#: the how-manieth client-tool pause of the turn; relay/langgraph/client_tools.py)
CLIENT_TOOL = "client_tool"
TURN_HUMAN_WAIT_MS = "relay.turn.human_wait_ms"
#: on the root of a run that takes up a turn whose previous run was cut (its process
#: died or stopped: relay/turns/recovering.py): the turn's attempt, why the previous run
#: stopped, and the checkpoint the run goes on from; the mapping makes ``turn_recovered``
RECOVERY_ATTEMPT = "relay.recovery.attempt"
RECOVERY_REASON = "relay.recovery.reason"
RECOVERY_RESUMED_FROM = "relay.recovery.resumed_from"
ERROR_CODE = "relay.error.code"
ERROR_MESSAGE = "relay.error.message"
ERROR_NODE = "relay.error.node"
ERROR_RETRYABLE = "relay.error.retryable"

MESSAGE_ID = "relay.message.id"
#: the turn a save_message span belongs to (not relay.turn.id: only run roots carry that)
MESSAGE_TURN_ID = "relay.message.turn_id"

NODE_NAME = "relay.node.name"
NODE_STEP = "relay.node.step"
NODE_TASK_ID = "relay.node.task_id"
NODE_NAMESPACE = "relay.node.namespace"  # string array: the enclosing nodes, outermost first
NODE_OUTCOME = "relay.node.outcome"
#: the how-manieth attempt a node span is, set from the second on (LangGraph's RetryPolicy
#: runs a failed node again; the failed attempt's outcome is ``retrying``)
NODE_ATTEMPT = "relay.node.attempt"
#: a child span's outcome when the span status cannot say it (``cancelled``)
SPAN_OUTCOME = "relay.span.outcome"

RETRIEVAL_DOCUMENTS = "relay.retrieval.documents"
GUARDRAIL_NAME = "relay.guardrail.name"
GUARDRAIL_DECISION = "relay.guardrail.decision"
GUARDRAIL_REASON = "relay.guardrail.reason"
TOOL_LABEL = "relay.tool.label"
#: a client-executed tool (relay.client_tool): its arguments are in TOOL_CALL_ARGUMENTS
TOOL_CLIENT = "relay.tool.client"
#: a tool that says (``metadata={"idempotent": True}``) that running it again is safe:
#: it does not keep a cut run from being recovered (``tool_started.idempotent``)
TOOL_IDEMPOTENT = "relay.tool.idempotent"
#: a server-side tool's TOOL_CALL_ARGUMENTS are cut at this many characters of JSON ...
TOOL_ARGUMENTS_MAX_CHARS = 16_384
#: ... and then this is true (``tool_started.args_truncated``)
TOOL_ARGS_TRUNCATED = "relay.tool.args_truncated"

# text as it is written: a span event on the model-call span, one per chunk
DELTA_EVENT = "gen_ai.content.delta"
DELTA_TEXT = "relay.delta.text"
DELTA_MESSAGE_ID = "relay.delta.message_id"

# a payload sent from inside a node (LangGraph's stream writer, LangChain's custom callback
# events): a span event on the node's span (relay/langgraph/custom_events.py)
CUSTOM_EVENT = "relay.custom"
CUSTOM_NAME = "relay.custom.name"  # the custom callback event's name; absent for a writer's
CUSTOM_DATA = "relay.custom.data"  # the payload as JSON text (cut to the size limit)
CUSTOM_TRUNCATED = "relay.custom.truncated"  # true when the payload was cut

#: Attributes that hold content (prompts, answers, tool arguments). They always reach the
#: relay; RELAY_CAPTURE_CONTENT=false strips them from what goes out over OTLP.
CONTENT_ATTRIBUTES = frozenset(
    {
        TURN_MESSAGE,
        TURN_RESPONSE,
        TURN_INTERRUPTS,
        TOOL_CALL_ARGUMENTS,
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.result",
        DELTA_TEXT,
        CUSTOM_DATA,
    }
)
#: Span events that hold content (dropped from OTLP export with the attributes above).
CONTENT_EVENTS = frozenset({DELTA_EVENT, CUSTOM_EVENT})

# -- start markers (docs/events.md, "Start markers") -----------------------------------------
#: A start marker is a zero-duration child span emitted when a span starts, so that a relay
#: that only receives finished spans (OTLP) learns of the start at once. It carries the id
#: of the span it announces, that span's parent id, and its start attributes (one JSON
#: object).
START_OF = "relay.start_of"
START_ATTRIBUTES = "relay.start.attributes"
START_PARENT = "relay.start.parent"
START_PREFIX = "relay.start "
