//! Every top-level field of the two chat routes' requests (OpenAI's Chat Completions on
//! `/v1/chat/completions`, Anthropic's Messages on `/v1/messages`) and what becomes of it at a
//! target of each dialect, in one table, [`FIELDS`], which the chat machine applies to every
//! target it tries and `docs/gateway.md` shows ([`markdown`], held to the page by a test).
//!
//! A field is [read](Rule::Read) by the route into OMA's request, which each format writes in its
//! own words; [passed](Rule::Pass) unchanged under its own name to a target of the client's own
//! dialect; [mapped](Rule::Map) with its meaning onto the target's words (`stop` to Anthropic's
//! `stop_sequences`, `reasoning_effort` to a thinking budget, `response_format` to Anthropic's
//! `output_config`); or [refused](Rule::Refuse) with a `400` naming the field and the target,
//! before anything is sent. A field the table does not name passes to a target of the client's
//! dialect and is refused by any other. Nothing is dropped unsaid: the operator's
//! `OMA_GATEWAY_DROP_PARAMS` ([`DropParams`]) may turn refusals into drops, which the gateway
//! names in its log and in the answer's `oma-dropped-params` header. A field whose value has
//! the wrong shape is refused whatever the setting.

use serde_json::{json, Map, Value};

use oma_core::adapter::{ai_sdk, anthropic, bedrock, gemini, ChatRequest, ForcedTool, Thinking};
use oma_core::error::Error;

use crate::Route;

/// The dialect a chat route's clients write: OpenAI's on `/v1/chat/completions`, Anthropic's
/// on `/v1/messages`.
pub fn own_dialect(route: Route) -> Dialect {
    match route {
        Route::Messages => Dialect::Anthropic,
        _ => Dialect::OpenAi,
    }
}

/// The wire format a target speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI's Chat Completions: OpenAI and every OpenAI-compatible preset or server.
    OpenAi,
    /// Anthropic's Messages.
    Anthropic,
    /// Gemini's `generateContent`.
    Gemini,
    /// Bedrock's Converse.
    Bedrock,
}

impl Dialect {
    /// Every dialect, in the table's column order.
    pub const ALL: [Dialect; 4] = [
        Dialect::OpenAi,
        Dialect::Anthropic,
        Dialect::Gemini,
        Dialect::Bedrock,
    ];

    /// The dialect of `provider`'s format: any provider but Anthropic, Gemini, Bedrock and the
    /// AI SDK bridge is OpenAI-compatible. `None` for the AI SDK bridge, which is no gateway
    /// target (its calls are made by a host's own code, not over HTTP: the gateway refuses a
    /// request to it before anything is sent).
    pub fn of(provider: &str) -> Option<Dialect> {
        Some(match provider {
            anthropic::NAME => Dialect::Anthropic,
            gemini::NAME => Dialect::Gemini,
            bedrock::NAME => Dialect::Bedrock,
            ai_sdk::NAME => return None,
            _ => Dialect::OpenAi,
        })
    }

    /// The dialect's name in the table.
    pub fn title(self) -> &'static str {
        match self {
            Dialect::OpenAi => "OpenAI-compatible",
            Dialect::Anthropic => "Anthropic",
            Dialect::Gemini => "Gemini",
            Dialect::Bedrock => "Bedrock",
        }
    }

    fn column(self) -> usize {
        match self {
            Dialect::OpenAi => 0,
            Dialect::Anthropic => 1,
            Dialect::Gemini => 2,
            Dialect::Bedrock => 3,
        }
    }
}

/// Why a mapping could not carry a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The target cannot honour this value (a refusal `OMA_GATEWAY_DROP_PARAMS` may turn into a
    /// drop): why.
    Unsupported(String),
    /// The value has the wrong shape for its field: always a `400`.
    Invalid(String),
}

/// What a mapping writes into: the target's request, with every field the client sent.
pub struct Mapping<'a> {
    /// The request to the target (its `extra_body` is spread into the target's body).
    pub request: &'a mut ChatRequest,
    /// Every field the client sent, for the mappings that read two together.
    pub fields: &'a Map<String, Value>,
}

/// A mapping: writes the value's meaning into the target's request, or says why it cannot.
pub type Mapper = fn(&Value, &mut Mapping) -> Result<(), Refusal>;

/// What becomes of a field at a target of one dialect.
#[derive(Clone, Copy)]
pub enum Rule {
    /// Read by the route into OMA's request; the target's format writes it in its own words.
    Read,
    /// Sent unchanged under its own name.
    Pass,
    /// Sent with its meaning in the target's words, as the text says.
    Map(&'static str, Mapper),
    /// Refused with a `400`, for this reason.
    Refuse(&'static str),
}

impl Rule {
    /// The rule in the docs' table.
    fn cell(&self) -> String {
        match self {
            Rule::Read => "read".into(),
            Rule::Pass => "passed".into(),
            Rule::Map(how, _) => (*how).into(),
            Rule::Refuse(why) => format!("refused: {why}"),
        }
    }
}

/// One field of one route and its rule for each dialect ([`Dialect::ALL`]'s order).
pub struct Field {
    /// The route whose requests carry it.
    pub route: Route,
    /// The field's name in the request.
    pub name: &'static str,
    /// The rule per dialect, in [`Dialect::ALL`]'s order.
    pub rules: [Rule; 4],
}

const fn field(route: Route, name: &'static str, rules: [Rule; 4]) -> Field {
    Field { route, name, rules }
}

use Route::{ChatCompletions as Chat, Messages};
use Rule::{Pass, Read, Refuse};

const ALL_READ: [Rule; 4] = [Read, Read, Read, Read];
const TOP_P: [Rule; 4] = [
    Read,
    Read,
    Rule::Map("as `generationConfig.topP`", top_p_to_gemini),
    Read,
];
const OPENAI_ONLY: &str = "OpenAI's own field";
const ANTHROPIC_ONLY: &str = "Anthropic's own field";
const NO_LOGPROBS: &str = "the gateway's answer carries no log probabilities";

/// The table: every field of both routes the gateway knows.
pub const FIELDS: &[Field] = &[
    // OpenAI's Chat Completions.
    field(Chat, "model", ALL_READ),
    field(Chat, "messages", ALL_READ),
    field(Chat, "tools", ALL_READ),
    field(Chat, "max_tokens", ALL_READ),
    field(
        Chat,
        "max_completion_tokens",
        [
            Rule::Map("passed (no `max_tokens` added)", completion_tokens),
            Read,
            Read,
            Read,
        ],
    ),
    field(Chat, "temperature", ALL_READ),
    field(Chat, "top_p", TOP_P),
    field(Chat, "stream", ALL_READ),
    field(
        Chat,
        "stream_options",
        [
            Rule::Map("read: `include_usage`", stream_options),
            Rule::Map("read: `include_usage`", stream_options),
            Rule::Map("read: `include_usage`", stream_options),
            Rule::Map("read: `include_usage`", stream_options),
        ],
    ),
    field(
        Chat,
        "n",
        [
            Rule::Map("1 only", one_choice),
            Rule::Map("1 only", one_choice),
            Rule::Map("1 only", one_choice),
            Rule::Map("1 only", one_choice),
        ],
    ),
    field(
        Chat,
        "stop",
        [
            Pass,
            Rule::Map("as `stop_sequences`", stop_to_anthropic),
            Rule::Map("as `generationConfig.stopSequences`", stop_to_generation),
            Rule::Map("as `inferenceConfig.stopSequences`", stop_to_generation),
        ],
    ),
    field(
        Chat,
        "seed",
        [
            Pass,
            Refuse("Anthropic's Messages API has no seed"),
            Rule::Map("as `generationConfig.seed`", seed_to_gemini),
            Refuse("Bedrock's Converse API has no seed"),
        ],
    ),
    field(
        Chat,
        "frequency_penalty",
        [
            Pass,
            Refuse("Anthropic's Messages API has no penalties"),
            Rule::Map("as `generationConfig.frequencyPenalty`", frequency_to_gemini),
            Refuse("Bedrock's Converse API has no penalties"),
        ],
    ),
    field(
        Chat,
        "presence_penalty",
        [
            Pass,
            Refuse("Anthropic's Messages API has no penalties"),
            Rule::Map("as `generationConfig.presencePenalty`", presence_to_gemini),
            Refuse("Bedrock's Converse API has no penalties"),
        ],
    ),
    field(
        Chat,
        "response_format",
        [
            Pass,
            Rule::Map(
                "`json_schema` as `output_config.format`; `text` is the default; `json_object` refused",
                response_format_to_anthropic,
            ),
            Rule::Map(
                "`json_schema` as `generationConfig.responseJsonSchema`, `json_object` as JSON `responseMimeType`",
                response_format_to_gemini,
            ),
            Rule::Map("`text` only", text_format_only),
        ],
    ),
    field(
        Chat,
        "tool_choice",
        [
            Pass,
            Rule::Map(
                "as `tool_choice`: `auto`, `none`, `required` as `any`, a function as `tool`",
                tool_choice_to_anthropic,
            ),
            Rule::Map(
                "`auto`; `none` sends no tools; `required` (`any`) as `functionCallingConfig` mode `ANY`, a function (`tool`) with its name in `allowedFunctionNames`",
                tool_choice_forced,
            ),
            Rule::Map(
                "`auto`; `none` sends no tools; `required` (`any`) as `toolChoice.any`, a function (`tool`) as `toolChoice.tool`",
                tool_choice_forced,
            ),
        ],
    ),
    field(
        Chat,
        "parallel_tool_calls",
        [
            Pass,
            Rule::Map(
                "`false` as `tool_choice.disable_parallel_tool_use`",
                parallel_to_anthropic,
            ),
            Rule::Map("`true` only (the default)", parallel_true_only),
            Rule::Map("`true` only (the default)", parallel_true_only),
        ],
    ),
    field(
        Chat,
        "reasoning_effort",
        [
            Pass,
            Rule::Map(
                "as `thinking`: `none` off, `minimal`/`low` 1024, `medium` 2048, `high` 4096 budget tokens",
                effort_to_thinking,
            ),
            Rule::Map(
                "as `thinkingConfig`, with the budgets of Anthropic's",
                effort_to_thinking,
            ),
            Refuse("this gateway's Bedrock format sends no reasoning settings"),
        ],
    ),
    field(
        Chat,
        "user",
        [
            Pass,
            Rule::Map("as `metadata.user_id`", user_to_anthropic),
            Refuse("Gemini has no end-user id"),
            Refuse("Bedrock's Converse API has no end-user id"),
        ],
    ),
    field(
        Chat,
        "metadata",
        [
            Pass,
            Refuse("Anthropic's `metadata` takes only `user_id` (send `user`)"),
            Refuse(OPENAI_ONLY),
            Refuse(OPENAI_ONLY),
        ],
    ),
    field(
        Chat,
        "logit_bias",
        [
            Pass,
            Refuse(OPENAI_ONLY),
            Refuse(OPENAI_ONLY),
            Refuse(OPENAI_ONLY),
        ],
    ),
    field(
        Chat,
        "logprobs",
        [
            Rule::Map("`false` only: the answer carries no log probabilities", no_logprobs),
            Rule::Map("`false` only: the answer carries no log probabilities", no_logprobs),
            Rule::Map("`false` only: the answer carries no log probabilities", no_logprobs),
            Rule::Map("`false` only: the answer carries no log probabilities", no_logprobs),
        ],
    ),
    field(
        Chat,
        "top_logprobs",
        [
            Refuse(NO_LOGPROBS),
            Refuse(NO_LOGPROBS),
            Refuse(NO_LOGPROBS),
            Refuse(NO_LOGPROBS),
        ],
    ),
    field(
        Chat,
        "modalities",
        [
            Rule::Map("`[\"text\"]` only: the answer is text", text_modality),
            Rule::Map("`[\"text\"]` only: the answer is text", text_modality),
            Rule::Map("`[\"text\"]` only: the answer is text", text_modality),
            Rule::Map("`[\"text\"]` only: the answer is text", text_modality),
        ],
    ),
    field(
        Chat,
        "audio",
        [
            Refuse("the gateway's answer carries no audio"),
            Refuse("the gateway's answer carries no audio"),
            Refuse("the gateway's answer carries no audio"),
            Refuse("the gateway's answer carries no audio"),
        ],
    ),
    field(
        Chat,
        "web_search_options",
        [
            Refuse("the gateway's answer carries no citations"),
            Refuse("the gateway's answer carries no citations"),
            Refuse("the gateway's answer carries no citations"),
            Refuse("the gateway's answer carries no citations"),
        ],
    ),
    field(
        Chat,
        "functions",
        [
            Refuse("deprecated: send `tools`"),
            Refuse("deprecated: send `tools`"),
            Refuse("deprecated: send `tools`"),
            Refuse("deprecated: send `tools`"),
        ],
    ),
    field(
        Chat,
        "function_call",
        [
            Refuse("deprecated: send `tool_choice`"),
            Refuse("deprecated: send `tool_choice`"),
            Refuse("deprecated: send `tool_choice`"),
            Refuse("deprecated: send `tool_choice`"),
        ],
    ),
    openai_own("store"),
    openai_own("service_tier"),
    openai_own("prediction"),
    openai_own("prompt_cache_key"),
    openai_own("prompt_cache_retention"),
    openai_own("safety_identifier"),
    openai_own("verbosity"),
    // Nested fields ([`crate::nested`]): an OpenAI-compatible target is sent the client's own
    // request ([`crate::openai::OwnRequest`]), so there every nested field passes as written;
    // the other targets are sent OMA's request read from the client's, whose model has no place
    // for what these rows name.
    elsewhere(
        "messages[].name",
        Refuse("OMA's messages carry no participant name"),
    ),
    elsewhere(
        "messages[].refusal",
        Refuse("OMA's messages carry no refusal (send it as `content`)"),
    ),
    elsewhere(
        "messages[].audio",
        Refuse("the gateway's messages carry no audio"),
    ),
    elsewhere(
        "messages[].function_call",
        Refuse("deprecated: send `tool_calls`"),
    ),
    elsewhere(
        "messages[].content[].image_url.detail",
        Rule::Map(
            "`auto` only (the default): OMA's image blocks carry no detail level",
            detail_auto_only,
        ),
    ),
    elsewhere(
        "tools[].function.strict",
        Rule::Map(
            "`false` only (the default): OMA's tool definitions carry no strict mode",
            strict_false_only,
        ),
    ),
    // Anthropic's Messages.
    field(Messages, "model", ALL_READ),
    field(Messages, "messages", ALL_READ),
    field(Messages, "system", ALL_READ),
    field(Messages, "tools", ALL_READ),
    field(Messages, "max_tokens", ALL_READ),
    field(Messages, "temperature", ALL_READ),
    field(Messages, "top_p", TOP_P),
    field(Messages, "stream", ALL_READ),
    field(
        Messages,
        "thinking",
        [
            Rule::Map(
                "`enabled` as `reasoning_effort` (budget under 2048 `low`, under 8192 `medium`, else `high`); `adaptive` and `disabled`: the model's default",
                thinking_to_effort,
            ),
            Read,
            Read,
            Rule::Map(
                "Anthropic's models (`anthropic.` in the id): as `additionalModelRequestFields.thinking`; others `disabled` only",
                thinking_at_bedrock,
            ),
        ],
    ),
    field(
        Messages,
        "stop_sequences",
        [
            Rule::Map("as `stop`", stop_sequences_to_openai),
            Pass,
            Rule::Map("as `generationConfig.stopSequences`", stop_to_generation),
            Rule::Map("as `inferenceConfig.stopSequences`", stop_to_generation),
        ],
    ),
    field(
        Messages,
        "top_k",
        [
            Rule::Map(
                "as `top_k` (servers such as vLLM take it; OpenAI answers 400)",
                top_k,
            ),
            Pass,
            Rule::Map("as `generationConfig.topK`", top_k_to_gemini),
            Rule::Map("as `additionalModelRequestFields.top_k`", top_k),
        ],
    ),
    field(
        Messages,
        "metadata",
        [
            Rule::Map("`user_id` as `user`", metadata_to_openai),
            Pass,
            Refuse("Gemini has no end-user id"),
            Refuse("Bedrock's Converse API has no end-user id"),
        ],
    ),
    field(
        Messages,
        "tool_choice",
        [
            Rule::Map(
                "as `tool_choice`: `any` as `required`, `tool` as a function; `disable_parallel_tool_use` as `parallel_tool_calls: false`",
                tool_choice_to_openai,
            ),
            Pass,
            Rule::Map(
                "`auto`; `none` sends no tools; `required` (`any`) as `functionCallingConfig` mode `ANY`, a function (`tool`) with its name in `allowedFunctionNames`",
                tool_choice_forced,
            ),
            Rule::Map(
                "`auto`; `none` sends no tools; `required` (`any`) as `toolChoice.any`, a function (`tool`) as `toolChoice.tool`",
                tool_choice_forced,
            ),
        ],
    ),
    field(
        Messages,
        "output_config",
        [
            Rule::Map(
                "`format` (`json_schema`) as `response_format`, `effort` as `reasoning_effort`",
                output_config_to_openai,
            ),
            Pass,
            Rule::Map(
                "`format` (`json_schema`) as `generationConfig.responseJsonSchema`",
                output_config_to_gemini,
            ),
            Refuse("this gateway's Bedrock format sends no output schema"),
        ],
    ),
    anthropic_own("output_format"),
    anthropic_own("service_tier"),
    anthropic_own("container"),
    anthropic_own("mcp_servers"),
    anthropic_own("context_management"),
    anthropic_own("inference_geo"),
    // Nested fields ([`crate::nested`]): the route reads the rest of a message, a block and a
    // tool into OMA's request; an Anthropic target is sent the client's own request, with
    // every nested field as written.
    field(
        Messages,
        "messages[].content[].citations",
        [
            Refuse("OMA's text blocks carry no citations"),
            Pass,
            Refuse("OMA's text blocks carry no citations"),
            Refuse("OMA's text blocks carry no citations"),
        ],
    ),
    field(
        Messages,
        "tools[].type",
        [
            Rule::Map(CUSTOM_TOOLS, custom_tool),
            Pass,
            Rule::Map(CUSTOM_TOOLS, custom_tool),
            Rule::Map(CUSTOM_TOOLS, custom_tool),
        ],
    ),
    // Not fields of the body, decided as they are: the prompt cache's markers, which the route
    // takes off the blocks that carry them (system blocks, tools, message blocks, tool-result
    // parts), and the `anthropic-beta` header ([`apply_markers_and_betas`]).
    field(
        Messages,
        CACHE_CONTROL,
        [
            Refuse("OpenAI-compatible providers cache by prefix and take no markers"),
            Pass,
            Refuse("Gemini caches through `cachedContent`, not markers"),
            Rule::Map("as a `cachePoint` after what it marks", marker_as_cache_point),
        ],
    ),
    field(
        Messages,
        ANTHROPIC_BETA,
        [
            Rule::Map(BETAS_ELSEWHERE, betas_elsewhere),
            Pass,
            Rule::Map(BETAS_ELSEWHERE, betas_elsewhere),
            Rule::Map(BETAS_ELSEWHERE, betas_elsewhere),
        ],
    ),
];

/// The row of the prompt cache's markers.
pub const CACHE_CONTROL: &str = "cache_control";
/// The row of the `anthropic-beta` header.
pub const ANTHROPIC_BETA: &str = "anthropic-beta";
const BETAS_ELSEWHERE: &str = "`claude-code`, `interleaved-thinking`, \
    `fine-grained-tool-streaming`, `token-efficient-tools`, `prompt-caching`, `token-counting` \
    (any date) honoured (they change nothing it must do); any other refused";

/// The reason of the nested fields no row names, at a target of another dialect than the
/// client's, which is sent OMA's request read from the client's.
const NESTED_ELSEWHERE: &str =
    "the gateway reads it into OMA's request, whose model has no place for it";
/// The reason a nested field its row passes is refused by a target of the client's own dialect
/// that is not sent the client's request as written ([`crate::openai::sent_as_written`]).
const REBUILT: &str = "this request is rebuilt for its target (it holds a part OpenAI's own \
    API takes in another form: media in a tool message, a media URL given as a string), and the \
    rebuilt request has no place for it";
const CUSTOM_TOOLS: &str = "`custom` only: a tool Anthropic defines runs at Anthropic only";

/// A nested field of `/v1/chat/completions`: passed to an OpenAI-compatible target, which is
/// sent the client's own request, and decided by `rule` at every other target.
const fn elsewhere(name: &'static str, rule: Rule) -> Field {
    field(Chat, name, [Pass, rule, rule, rule])
}

const fn openai_own(name: &'static str) -> Field {
    field(
        Chat,
        name,
        [
            Pass,
            Refuse(OPENAI_ONLY),
            Refuse(OPENAI_ONLY),
            Refuse(OPENAI_ONLY),
        ],
    )
}

const fn anthropic_own(name: &'static str) -> Field {
    field(
        Messages,
        name,
        [
            Refuse(ANTHROPIC_ONLY),
            Pass,
            Refuse(ANTHROPIC_ONLY),
            Refuse(ANTHROPIC_ONLY),
        ],
    )
}

/// The row of `name` on `route`, if the table has one (a top-level field's, or a nested
/// field's by its row, such as `messages[].name`).
pub fn field_of(route: Route, name: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.route == route && f.name == name)
}

/// Whether a row's name is a nested field's (`messages[].name`), not a top-level one's.
fn is_nested(name: &str) -> bool {
    name.contains(['[', '.'])
}

/// The rule for the top-level field `name` on `route` at a target of `dialect`: its row's, or
/// for a field the table does not name, passed to the route's own dialect and refused by the
/// others.
pub fn rule(route: Route, name: &str, dialect: Dialect) -> Rule {
    match field_of(route, name).filter(|_| !is_nested(name)) {
        Some(field) => field.rules[dialect.column()],
        None if dialect == own_dialect(route) => Rule::Pass,
        None => Rule::Refuse("a field the gateway does not know passes to its own dialect only"),
    }
}

/// The rule for a nested field of row `row` on `route` at a target of `dialect`: its row's, or
/// for a nested field the table does not name, passed to the route's own dialect, whose
/// targets are sent the client's own request (an Anthropic target of `/v1/messages`, an
/// OpenAI-compatible one of `/v1/chat/completions`), and refused elsewhere.
pub fn nested_rule(route: Route, row: &str, dialect: Dialect) -> Rule {
    match field_of(route, row) {
        Some(field) => field.rules[dialect.column()],
        None if dialect == own_dialect(route) => Rule::Pass,
        None => Rule::Refuse(NESTED_ELSEWHERE),
    }
}

/// The rows that are no field of the body ([`CACHE_CONTROL`], [`ANTHROPIC_BETA`]) applied to
/// `request`, bound for `target` of `dialect`: the request's cache markers (when `markers`, a
/// completion: a count caches nothing) kept where the row passes or maps them, else refused
/// with the row's reason or, under `drop`, taken off; the client's `beta` header checked
/// against the row. Returns the names of the rows dropped.
pub fn apply_markers_and_betas(
    dialect: Dialect,
    target: &str,
    request: &mut ChatRequest,
    markers: bool,
    beta: Option<&str>,
    drop: &DropParams,
) -> Result<Vec<String>, Error> {
    let mut dropped = Vec::new();
    let sent = [
        (
            CACHE_CONTROL,
            markers && !request.cache.is_empty(),
            Value::Null,
        ),
        (
            ANTHROPIC_BETA,
            beta.is_some(),
            Value::String(beta.unwrap_or_default().to_owned()),
        ),
    ];
    for (name, present, value) in sent {
        if !present {
            continue;
        }
        let refusal = match rule(Route::Messages, name, dialect) {
            Rule::Read | Rule::Pass => None,
            Rule::Map(_, map) => {
                let fields = Map::new();
                let mut mapping = Mapping {
                    request,
                    fields: &fields,
                };
                match map(&value, &mut mapping) {
                    Ok(()) => None,
                    Err(Refusal::Invalid(why) | Refusal::Unsupported(why)) => Some(why),
                }
            }
            Rule::Refuse(why) => Some(why.to_owned()),
        };
        let Some(why) = refusal else {
            continue;
        };
        if drop.drops(name) {
            if name == CACHE_CONTROL {
                request.cache.clear();
            }
            dropped.push(name.to_owned());
            continue;
        }
        return Err(Error::InvalidRequest {
            message: format!(
                "`{name}` cannot be sent to {} ({} target): {why}; the operator's \
                 OMA_GATEWAY_DROP_PARAMS can drop it instead",
                printable(target),
                dialect.title()
            ),
        });
    }
    Ok(dropped)
}

/// `OMA_GATEWAY_DROP_PARAMS`: which refusals become drops.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DropParams {
    /// Unset (or `false`): every refusal is a `400`.
    #[default]
    Never,
    /// `true`: every refused field is dropped.
    All,
    /// Field names separated by commas: these are dropped where refused, the others refused.
    Only(String),
}

impl DropParams {
    /// The setting's value: `true`, `false`, or field names (letters, digits, `_`, `-`, and
    /// for a nested field's row `.`, `[` and `]`) separated by commas; `None` for anything
    /// else.
    pub fn parse(text: &str) -> Option<DropParams> {
        match text.trim() {
            "true" => Some(DropParams::All),
            "false" | "" => Some(DropParams::Never),
            list => list
                .bytes()
                .all(|b| {
                    b.is_ascii_alphanumeric()
                        || matches!(b, b'_' | b'-' | b',' | b' ' | b'.' | b'[' | b']')
                })
                .then(|| DropParams::Only(list.to_owned())),
        }
    }

    /// Whether a refusal of `name` is a drop.
    pub fn drops(&self, name: &str) -> bool {
        match self {
            DropParams::Never => false,
            DropParams::All => true,
            DropParams::Only(list) => list.split(',').any(|n| n.trim() == name),
        }
    }
}

/// The fields a client sent (beyond the conversation, the tools and the system prompt, which
/// the route has taken), kept to be applied to each target the request is tried on.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientFields {
    /// The route they came by.
    pub route: Route,
    /// The fields, as sent.
    pub values: Map<String, Value>,
    /// The nested fields the route did not read ([`crate::nested`]).
    pub nested: Vec<NestedField>,
}

/// A nested field a client sent that its route does not read: a member of a message, a
/// content part, a tool call, a tool or a system block ([`crate::nested`]).
#[derive(Clone, Debug, PartialEq)]
pub struct NestedField {
    /// Its row of the table: its path with the indexes left out (`messages[].name`), the name
    /// `OMA_GATEWAY_DROP_PARAMS` lists.
    pub row: String,
    /// Where it is (`messages[2].name`), the place a refusal names.
    pub path: String,
    /// Its value when it is small and no object or array (what the mappings read), else
    /// `null`.
    pub value: Value,
}

/// Applies the client's `fields` to `request`, bound for `target` (`<provider>/<model>`) of
/// `dialect`: the fields passed or mapped are written into it; the first refusal is an
/// [`Error::InvalidRequest`] naming the field and the target, unless `drop` drops it. Returns
/// the names of the fields dropped. A `null` field counts as not sent. `as_written` says
/// whether the target is sent the client's own request, where the nested fields its rows pass
/// are already (without it, such a field has no place in what is sent, and is refused).
pub fn apply(
    fields: &ClientFields,
    dialect: Dialect,
    target: &str,
    request: &mut ChatRequest,
    drop: &DropParams,
    as_written: bool,
) -> Result<Vec<String>, Error> {
    let mut dropped = Vec::new();
    for (name, value) in &fields.values {
        if value.is_null() {
            continue;
        }
        let refusal = match rule(fields.route, name, dialect) {
            Rule::Read => None,
            Rule::Pass => {
                request.extra_body.insert(name.clone(), value.clone());
                None
            }
            Rule::Map(_, map) => {
                let mut mapping = Mapping {
                    request,
                    fields: &fields.values,
                };
                match map(value, &mut mapping) {
                    Ok(()) => None,
                    Err(Refusal::Invalid(why)) => {
                        return Err(Error::InvalidRequest {
                            message: format!("`{}` {why}", printable(name)),
                        })
                    }
                    Err(Refusal::Unsupported(why)) => Some(why),
                }
            }
            Rule::Refuse(why) => Some(why.to_owned()),
        };
        let Some(why) = refusal else {
            continue;
        };
        if drop.drops(name) {
            dropped.push(header_safe(name));
            continue;
        }
        return Err(Error::InvalidRequest {
            message: format!(
                "`{}` cannot be sent to {} ({} target): {why}; the operator's \
                 OMA_GATEWAY_DROP_PARAMS can drop it instead",
                printable(name),
                printable(target),
                dialect.title()
            ),
        });
    }
    for field in &fields.nested {
        let refusal = match nested_rule(fields.route, &field.row, dialect) {
            Rule::Pass if !as_written => Some(REBUILT.to_owned()),
            Rule::Read | Rule::Pass => None,
            Rule::Map(_, map) => {
                let mut mapping = Mapping {
                    request,
                    fields: &fields.values,
                };
                match map(&field.value, &mut mapping) {
                    Ok(()) => None,
                    Err(Refusal::Invalid(why)) => {
                        return Err(Error::InvalidRequest {
                            message: format!("`{}` {why}", printable(&field.path)),
                        })
                    }
                    Err(Refusal::Unsupported(why)) => Some(why),
                }
            }
            Rule::Refuse(why) => Some(why.to_owned()),
        };
        let Some(why) = refusal else {
            continue;
        };
        if drop.drops(&field.row) {
            let row = header_safe(&field.row);
            if !dropped.contains(&row) {
                dropped.push(row);
            }
            continue;
        }
        return Err(Error::InvalidRequest {
            message: format!(
                "`{}` cannot be sent to {} ({} target): {why}; the operator's \
                 OMA_GATEWAY_DROP_PARAMS can drop it instead (as `{}`)",
                printable(&field.path),
                printable(target),
                dialect.title(),
                printable(&field.row)
            ),
        });
    }
    Ok(dropped)
}

/// A client's field name as the `oma-dropped-params` header lists it: at most 100 characters,
/// each visible ASCII or a space (anything else `?`), so that no name a client chose can break
/// or add a header.
fn header_safe(name: &str) -> String {
    name.chars()
        .take(100)
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .collect()
}

/// A client's field name or model for a message: at most 100 characters, no control ones.
fn printable(text: &str) -> String {
    text.chars()
        .take(100)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The table as `docs/gateway.md` shows it: one Markdown table per route.
pub fn markdown() -> String {
    let mut out = String::new();
    for (route, path) in [
        (Route::ChatCompletions, "/v1/chat/completions"),
        (Route::Messages, "/v1/messages"),
    ] {
        out.push_str(&format!("`{path}`:\n\n| field |"));
        for dialect in Dialect::ALL {
            out.push_str(&format!(" {} |", dialect.title()));
        }
        out.push_str("\n|---|---|---|---|---|\n");
        for field in FIELDS.iter().filter(|f| f.route == route) {
            out.push_str(&format!("| `{}` |", field.name));
            for rule in &field.rules {
                out.push_str(&format!(" {} |", rule.cell().replace('|', "\\|")));
            }
            out.push('\n');
        }
        out.push_str(&format!(
            "| any other | {} |\n",
            Dialect::ALL
                .iter()
                .map(|d| if *d == own_dialect(route) {
                    "passed"
                } else {
                    "refused"
                })
                .collect::<Vec<_>>()
                .join(" | ")
        ));
        out.push_str(&format!(
            "| any other nested field | {} |\n\n",
            Dialect::ALL
                .iter()
                .map(|d| match nested_rule(route, "", *d) {
                    Rule::Pass => "passed".to_owned(),
                    other => other.cell(),
                })
                .collect::<Vec<_>>()
                .join(" | ")
        ));
    }
    out.trim_end().to_owned() + "\n"
}

// The mappings.

/// The prompt cache's markers at Bedrock: its format writes each as a `cachePoint` after what
/// it marks.
fn marker_as_cache_point(_: &Value, _: &mut Mapping) -> Result<(), Refusal> {
    Ok(())
}

/// The `anthropic-beta` header at a target other than Anthropic's: each beta honoured there as
/// it is ([`crate::anthropic::BETAS_ANY_TARGET`]), or the first other refused by name.
fn betas_elsewhere(value: &Value, _: &mut Mapping) -> Result<(), Refusal> {
    match crate::anthropic::unhonoured_beta(value.as_str().unwrap_or_default()) {
        None => Ok(()),
        Some(beta) => unsupported(format!(
            "the beta {:?} may be one the request depends on, and only Anthropic takes it",
            printable(beta)
        )),
    }
}

/// An image part's `detail` (`image_url.detail`): `auto`, the default, is what every target
/// does with no detail given; another level has no place in OMA's image block.
fn detail_auto_only(value: &Value, _: &mut Mapping) -> Result<(), Refusal> {
    match value.as_str() {
        Some("auto") => Ok(()),
        Some("low" | "high") => unsupported("OMA's image blocks carry no detail level"),
        _ => invalid("must be `auto`, `low` or `high`"),
    }
}

/// A function's `strict`: `false`, the default, asks nothing; `true` has no place in OMA's
/// tool definitions.
fn strict_false_only(value: &Value, _: &mut Mapping) -> Result<(), Refusal> {
    match value {
        Value::Bool(false) => Ok(()),
        Value::Bool(true) => unsupported("OMA's tool definitions carry no strict mode"),
        _ => invalid("must be a boolean"),
    }
}

/// A tool's `type` on `/v1/messages`: `custom` (a tool the client defines, what a tool with no
/// type is) reaches any target as a tool; a tool Anthropic defines (`bash_...`,
/// `web_search_...`) runs at Anthropic only.
fn custom_tool(value: &Value, _: &mut Mapping) -> Result<(), Refusal> {
    match value.as_str() {
        Some("custom") => Ok(()),
        Some(other) => unsupported(format!(
            "the tool type `{}` is one Anthropic defines, which runs at Anthropic only",
            printable(other)
        )),
        None => invalid("must be a string"),
    }
}

/// Refuses the first member of `object` (at `path`) that is not `null` and not one of `read`:
/// a mapping writes what it reads, and a member it would leave behind is no drop to make
/// unsaid.
fn only_members(object: &Map<String, Value>, path: &str, read: &[&str]) -> Result<(), Refusal> {
    match object
        .iter()
        .find(|(key, value)| !value.is_null() && !read.contains(&key.as_str()))
    {
        Some((key, _)) => Err(Refusal::Unsupported(format!(
            "this target's format has no place for `{path}.{}`",
            printable(key)
        ))),
        None => Ok(()),
    }
}

fn unsupported(why: impl Into<String>) -> Result<(), Refusal> {
    Err(Refusal::Unsupported(why.into()))
}

fn invalid(why: impl Into<String>) -> Result<(), Refusal> {
    Err(Refusal::Invalid(why.into()))
}

/// Runs `edit` on the object under `key` in the request's extra body (made one if absent).
fn with_object(request: &mut ChatRequest, key: &str, edit: impl FnOnce(&mut Map<String, Value>)) {
    let mut object = match request.extra_body.remove(key) {
        Some(Value::Object(object)) => object,
        _ => Map::new(),
    };
    edit(&mut object);
    request
        .extra_body
        .insert(key.to_owned(), Value::Object(object));
}

/// A stop sequence list: a string or an array of strings.
fn stop_list(value: &Value) -> Result<Vec<Value>, Refusal> {
    match value {
        Value::String(_) => Ok(vec![value.clone()]),
        Value::Array(items) if items.iter().all(Value::is_string) => Ok(items.clone()),
        _ => Err(Refusal::Invalid(
            "must be a string or an array of strings".into(),
        )),
    }
}

/// Sets `key` of the target format's generation settings ([`ChatRequest::generation_extra`]).
fn generation(m: &mut Mapping, key: &str, value: Value) -> Result<(), Refusal> {
    m.request.generation_extra.insert(key.to_owned(), value);
    Ok(())
}

/// `value` if it is a number.
fn number(value: &Value) -> Result<Value, Refusal> {
    if value.is_number() {
        Ok(value.clone())
    } else {
        Err(Refusal::Invalid("must be a number".into()))
    }
}

fn stop_to_generation(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    let list = stop_list(value)?;
    generation(m, "stopSequences", Value::Array(list))
}

fn seed_to_gemini(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    if !(value.is_i64() || value.is_u64()) {
        return invalid("must be a whole number");
    }
    generation(m, "seed", value.clone())
}

fn top_p_to_gemini(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    generation(m, "topP", number(value)?)
}

fn frequency_to_gemini(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    generation(m, "frequencyPenalty", number(value)?)
}

fn presence_to_gemini(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    generation(m, "presencePenalty", number(value)?)
}

fn top_k_to_gemini(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    if !value.is_u64() {
        return invalid("must be a whole number");
    }
    generation(m, "topK", value.clone())
}

/// Gemini's JSON output: the MIME type, and the schema when there is one.
fn gemini_json(m: &mut Mapping, schema: Option<&Value>) -> Result<(), Refusal> {
    generation(m, "responseMimeType", json!("application/json"))?;
    match schema {
        Some(schema) => generation(m, "responseJsonSchema", schema.clone()),
        None => Ok(()),
    }
}

fn response_format_to_gemini(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    match format_kind(value)? {
        "text" => Ok(()),
        "json_object" => gemini_json(m, None),
        "json_schema" => {
            let schema = value
                .get("json_schema")
                .and_then(|s| s.get("schema"))
                .filter(|s| s.is_object())
                .ok_or_else(|| {
                    Refusal::Invalid("`json_schema.schema` must be a JSON schema object".into())
                })?;
            gemini_json(m, Some(schema))
        }
        other => unsupported(format!(
            "Gemini takes no `{}` response format",
            printable(other)
        )),
    }
}

fn output_config_to_gemini(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    let Value::Object(config) = value else {
        return invalid("must be an object");
    };
    if let Some(other) = config.keys().find(|k| k.as_str() != "format") {
        return unsupported(format!(
            "Gemini's format has no place for `output_config.{}`",
            printable(other)
        ));
    }
    match config.get("format") {
        None | Some(Value::Null) => Ok(()),
        Some(format) if format.get("type").and_then(Value::as_str) == Some("json_schema") => {
            if let Value::Object(members) = format {
                only_members(members, "output_config.format", &["type", "schema"])?;
            }
            let schema = format
                .get("schema")
                .filter(|s| s.is_object())
                .ok_or_else(|| {
                    Refusal::Invalid("`format.schema` must be a JSON schema object".into())
                })?;
            gemini_json(m, Some(schema))
        }
        Some(_) => unsupported("Gemini's format maps `format` of type `json_schema` only"),
    }
}

fn completion_tokens(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    m.request
        .extra_body
        .insert("max_completion_tokens".into(), value.clone());
    if !m.fields.contains_key("max_tokens") {
        m.request.sampling.max_tokens = None;
    }
    Ok(())
}

fn stream_options(value: &Value, _: &mut Mapping) -> Result<(), Refusal> {
    let Value::Object(options) = value else {
        return invalid("must be an object");
    };
    for (key, option) in options {
        match (key.as_str(), option) {
            ("include_usage", Value::Bool(_) | Value::Null) => {}
            ("include_usage", _) => return invalid("`include_usage` must be a boolean"),
            (other, _) => {
                return unsupported(format!(
                    "the gateway writes the stream itself and reads only `include_usage`, not `{}`",
                    printable(other)
                ))
            }
        }
    }
    Ok(())
}

fn one_choice(value: &Value, _: &mut Mapping) -> Result<(), Refusal> {
    match value.as_u64() {
        Some(1) => Ok(()),
        Some(_) => unsupported("the gateway asks for one choice"),
        None => invalid("must be a positive whole number"),
    }
}

fn stop_to_anthropic(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    let list = stop_list(value)?;
    m.request
        .extra_body
        .insert("stop_sequences".into(), Value::Array(list));
    Ok(())
}

fn stop_sequences_to_openai(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    let list = stop_list(value)?;
    m.request
        .extra_body
        .insert("stop".into(), Value::Array(list));
    Ok(())
}

fn top_k(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    let k = value
        .as_u64()
        .and_then(|k| u32::try_from(k).ok())
        .ok_or_else(|| Refusal::Invalid("must be a whole number".into()))?;
    m.request.sampling.top_k = Some(k);
    Ok(())
}

/// The kind of an OpenAI `response_format`, whose members a mapping reads all of: `type`,
/// and `json_schema`'s `name` (which only names it), `schema` and `strict` (the targets that
/// take a schema hold the answer to it).
fn format_kind(value: &Value) -> Result<&str, Refusal> {
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| Refusal::Invalid("must be an object with a `type`".into()))?;
    if let Value::Object(format) = value {
        only_members(format, "response_format", &["type", "json_schema"])?;
        if let Some(Value::Object(schema)) = format.get("json_schema") {
            let read = ["name", "schema", "strict"];
            only_members(schema, "response_format.json_schema", &read)?;
        }
    }
    Ok(kind)
}

fn text_format_only(value: &Value, _: &mut Mapping) -> Result<(), Refusal> {
    match format_kind(value)? {
        "text" => Ok(()),
        other => unsupported(format!(
            "this target's format takes no `{}` response format",
            printable(other)
        )),
    }
}

fn response_format_to_anthropic(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    match format_kind(value)? {
        "text" => Ok(()),
        "json_schema" => {
            let schema = value
                .get("json_schema")
                .and_then(|s| s.get("schema"))
                .filter(|s| s.is_object())
                .ok_or_else(|| {
                    Refusal::Invalid("`json_schema.schema` must be a JSON schema object".into())
                })?;
            let format = json!({"type": "json_schema", "schema": schema});
            with_object(m.request, "output_config", |config| {
                config.insert("format".into(), format);
            });
            Ok(())
        }
        "json_object" => {
            unsupported("Anthropic takes a JSON schema (`json_schema`), not JSON mode")
        }
        other => unsupported(format!(
            "Anthropic takes no `{}` response format",
            printable(other)
        )),
    }
}

/// OpenAI's `tool_choice` as (`auto` | `none` | `required` | `function`, the function's name).
fn openai_choice(value: &Value) -> Result<(&str, Option<&str>), Refusal> {
    match value {
        Value::String(kind) if matches!(kind.as_str(), "auto" | "none" | "required") => {
            Ok((kind.as_str(), None))
        }
        Value::Object(choice) if choice.get("type").and_then(Value::as_str) == Some("function") => {
            only_members(choice, "tool_choice", &["type", "function"])?;
            if let Some(Value::Object(function)) = choice.get("function") {
                only_members(function, "tool_choice.function", &["name"])?;
            }
            let name = choice
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .ok_or_else(|| Refusal::Invalid("`function.name` is required".into()))?;
            Ok(("function", Some(name)))
        }
        Value::Object(choice) => match choice.get("type").and_then(Value::as_str) {
            Some(kind) => Err(Refusal::Unsupported(format!(
                "the gateway maps `auto`, `none`, `required` and a function, not `{}`",
                printable(kind)
            ))),
            None => Err(Refusal::Invalid("must name its `type`".into())),
        },
        _ => Err(Refusal::Invalid(
            "must be `auto`, `none`, `required` or an object".into(),
        )),
    }
}

/// Anthropic's `tool_choice` as (`auto` | `none` | `any` | `tool`, the tool's name, whether
/// parallel tool use is off).
fn anthropic_choice(value: &Value) -> Result<(&str, Option<&str>, bool), Refusal> {
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| Refusal::Invalid("must be an object with a `type`".into()))?;
    if let Value::Object(choice) = value {
        let read = ["type", "name", "disable_parallel_tool_use"];
        only_members(choice, "tool_choice", &read)?;
    }
    let serial = match value.get("disable_parallel_tool_use") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(Refusal::Invalid(
                "`disable_parallel_tool_use` must be a boolean".into(),
            ))
        }
    };
    match kind {
        "auto" | "none" | "any" => Ok((kind, None, serial)),
        "tool" => {
            let name = value
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| Refusal::Invalid("`name` is required with `tool`".into()))?;
            Ok((kind, Some(name), serial))
        }
        other => Err(Refusal::Unsupported(format!(
            "the gateway maps `auto`, `none`, `any` and `tool`, not `{}`",
            printable(other)
        ))),
    }
}

fn tool_choice_to_anthropic(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    let (kind, name) = openai_choice(value)?;
    let kind = match kind {
        "required" => "any",
        "function" => "tool",
        other => other,
    };
    with_object(m.request, "tool_choice", |choice| {
        choice.insert("type".into(), json!(kind));
        if let Some(name) = name {
            choice.insert("name".into(), json!(name));
        }
    });
    Ok(())
}

fn tool_choice_forced(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    let (kind, name) = match value {
        Value::String(_) => openai_choice(value)?,
        _ if value.get("function").is_some() => openai_choice(value)?,
        _ => {
            let (kind, name, serial) = anthropic_choice(value)?;
            if serial {
                return unsupported("this target's format cannot turn parallel tool calls off");
            }
            (kind, name)
        }
    };
    m.request.forced_tool = match (kind, name) {
        ("auto", _) => None,
        ("none", _) => {
            m.request.tools.clear();
            None
        }
        ("function" | "tool", Some(name)) => Some(ForcedTool::Named(name.to_owned())),
        _ => Some(ForcedTool::Any),
    };
    Ok(())
}

fn tool_choice_to_openai(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    let (kind, name, serial) = anthropic_choice(value)?;
    let choice = match (kind, name) {
        ("any", _) => json!("required"),
        ("tool", Some(name)) => json!({"type": "function", "function": {"name": name}}),
        (kind, _) => json!(kind),
    };
    m.request.extra_body.insert("tool_choice".into(), choice);
    if serial {
        m.request.sampling.parallel_tool_calls = Some(false);
    }
    Ok(())
}

fn parallel_to_anthropic(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    match value {
        Value::Bool(true) => Ok(()),
        Value::Bool(false) => {
            with_object(m.request, "tool_choice", |choice| {
                choice.entry("type").or_insert_with(|| json!("auto"));
                choice.insert("disable_parallel_tool_use".into(), json!(true));
            });
            Ok(())
        }
        _ => invalid("must be a boolean"),
    }
}

fn parallel_true_only(value: &Value, _: &mut Mapping) -> Result<(), Refusal> {
    match value {
        Value::Bool(true) => Ok(()),
        Value::Bool(false) => {
            unsupported("this target's format cannot turn parallel tool calls off")
        }
        _ => invalid("must be a boolean"),
    }
}

/// The thinking budget for an OpenAI reasoning effort (`None`: thinking off).
fn effort_budget(effort: &str) -> Result<Option<u32>, Refusal> {
    Ok(Some(match effort {
        "none" => return Ok(None),
        "minimal" | "low" => 1024,
        "medium" => 2048,
        "high" => 4096,
        _ => {
            return Err(Refusal::Invalid(
                "must be `none`, `minimal`, `low`, `medium` or `high`".into(),
            ))
        }
    }))
}

fn effort_to_thinking(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    let effort = value
        .as_str()
        .ok_or_else(|| Refusal::Invalid("must be a string".into()))?;
    m.request.thinking = effort_budget(effort)?.map(|budget| Thinking {
        enabled: true,
        budget_tokens: Some(budget),
    });
    Ok(())
}

fn user_to_anthropic(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    if !value.is_string() {
        return invalid("must be a string");
    }
    with_object(m.request, "metadata", |metadata| {
        metadata.insert("user_id".into(), value.clone());
    });
    Ok(())
}

fn metadata_to_openai(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    let Value::Object(metadata) = value else {
        return invalid("must be an object");
    };
    let mut user = None;
    for (key, item) in metadata {
        match (key.as_str(), item) {
            ("user_id", Value::String(id)) => user = Some(id.clone()),
            ("user_id", Value::Null) => {}
            ("user_id", _) => return invalid("`user_id` must be a string"),
            (other, _) => {
                return unsupported(format!(
                    "OpenAI's format has no place for `metadata.{}`",
                    printable(other)
                ))
            }
        }
    }
    if let Some(user) = user {
        m.request
            .extra_body
            .insert("user".into(), Value::String(user));
    }
    Ok(())
}

fn no_logprobs(value: &Value, _: &mut Mapping) -> Result<(), Refusal> {
    match value {
        Value::Bool(false) => Ok(()),
        Value::Bool(true) => unsupported(NO_LOGPROBS),
        _ => invalid("must be a boolean"),
    }
}

fn text_modality(value: &Value, _: &mut Mapping) -> Result<(), Refusal> {
    match value.as_array() {
        Some(items) if items.iter().all(|m| m == "text") => Ok(()),
        Some(_) => unsupported("the gateway's answer is text only"),
        None => invalid("must be an array"),
    }
}

/// Anthropic's `thinking` as an OpenAI reasoning effort (see the table).
fn thinking_to_effort(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    let kind = value
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| Refusal::Invalid("must be an object with a `type`".into()))?;
    if kind != "enabled" {
        return Ok(());
    }
    let budget = value
        .get("budget_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(1024);
    let effort = match budget {
        0..=2047 => "low",
        2048..=8191 => "medium",
        _ => "high",
    };
    m.request.sampling.reasoning_effort = Some(effort.into());
    Ok(())
}

/// Anthropic's `thinking` at Bedrock: Anthropic's models there take it as it is among the
/// model's own fields (`additionalModelRequestFields`, where the format spreads the extra body);
/// the others have no thinking to turn on.
fn thinking_at_bedrock(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    match value.get("type").and_then(Value::as_str) {
        Some("disabled") => Ok(()),
        Some(_) if m.request.model.contains("anthropic.") => {
            // The route read it into the request's own thinking, which Bedrock's format does
            // not send; the model's field carries it as the client wrote it.
            m.request.thinking = None;
            m.request
                .extra_body
                .insert("thinking".to_owned(), value.clone());
            Ok(())
        }
        Some(_) => unsupported(
            "only Anthropic's models on Bedrock take thinking (an `anthropic.` model id)",
        ),
        None => invalid("must be an object with a `type`"),
    }
}

fn output_config_to_openai(value: &Value, m: &mut Mapping) -> Result<(), Refusal> {
    let Value::Object(config) = value else {
        return invalid("must be an object");
    };
    // Everything is checked before anything is written: a refusal leaves the request as it was.
    let (mut format, mut effort) = (None, None);
    for (key, item) in config {
        match key.as_str() {
            "format" | "effort" if item.is_null() => {}
            "format" => {
                if let Value::Object(format) = item {
                    only_members(format, "output_config.format", &["type", "schema"])?;
                }
                if item.get("type").and_then(Value::as_str) != Some("json_schema") {
                    return unsupported("OpenAI's format maps `format` of type `json_schema` only");
                }
                let schema = item
                    .get("schema")
                    .filter(|s| s.is_object())
                    .ok_or_else(|| {
                        Refusal::Invalid("`format.schema` must be a JSON schema object".into())
                    })?;
                format = Some(json!({"type": "json_schema",
                                     "json_schema": {"name": "output", "schema": schema,
                                                     "strict": true}}));
            }
            "effort" => {
                effort = match item.as_str() {
                    Some(level @ ("low" | "medium" | "high")) => Some(level.to_owned()),
                    Some(other) => {
                        return unsupported(format!(
                            "OpenAI's reasoning_effort has no `{}`",
                            printable(other)
                        ))
                    }
                    None => return invalid("`effort` must be a string"),
                };
            }
            other => {
                return unsupported(format!(
                    "OpenAI's format has no place for `output_config.{}`",
                    printable(other)
                ))
            }
        }
    }
    if let Some(format) = format {
        m.request
            .extra_body
            .insert("response_format".into(), format);
    }
    if let Some(effort) = effort {
        m.request.sampling.reasoning_effort = Some(effort);
    }
    Ok(())
}
