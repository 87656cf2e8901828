//! The stable `code` of every reason the runner reports (`reasons[].code` and
//! `notes[].code` of the `--json` reports, the reasons files beside quarantined
//! documents, the refusal codes of the network log), one variant per code, and the
//! reference page `docs/src/reference/reason-codes.md` rendered from them.
//!
//! The `forbidden.*` codes are not variants: each names a rule of the policy in use
//! ([`DEFAULT_FORBIDDEN_RULES`] lists the default policy's), so a host reads them as
//! strings.

use serde::{Deserialize, Serialize};

/// Defines [`ReasonCode`] from families of `Variant = "code" => "meaning"`: the meaning
/// is both the variant's doc and the reference page's text.
macro_rules! reason_codes {
    ($($family:literal => $intro:literal {
        $($variant:ident = $code:literal => $meaning:literal,)+
    })+) => {
        /// A stable reason code, serialised as its dotted string (`yaml.alias`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
        pub enum ReasonCode {
            $($(#[doc = $meaning] #[serde(rename = $code)] $variant,)+)+
        }

        impl ReasonCode {
            /// Every code, family by family, in the reference page's order.
            pub const ALL: &'static [ReasonCode] = &[$($(Self::$variant,)+)+];

            /// The code as reports print it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($(Self::$variant => $code,)+)+
                }
            }

            /// What triggers the code, in one sentence.
            pub fn meaning(self) -> &'static str {
                match self {
                    $($(Self::$variant => $meaning,)+)+
                }
            }

            /// The family the code belongs to: the part before the dot (`yaml`), or
            /// `governed` for the governed-packet codes, which have no dot.
            pub fn family(self) -> &'static str {
                match self {
                    $($(Self::$variant => $family,)+)+
                }
            }
        }

        /// Every family with its one-line introduction, in the reference page's order.
        pub const FAMILIES: &[(&str, &str)] = &[$(($family, $intro),)+];
    };
}

impl ReasonCode {
    /// The variant whose code is `code`, if any (`forbidden.*` codes never are).
    pub fn from_code(code: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.as_str() == code)
    }
}

impl std::fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// The default policy's forbidden rules (`policies/default.toml`): code and message,
/// one entry per code (a code may have several rules).
pub const DEFAULT_FORBIDDEN_RULES: &[(&str, &str)] = &[
    (
        "forbidden.package_install",
        "instructions to install packages",
    ),
    ("forbidden.secret", "an embedded secret"),
    (
        "forbidden.privileged_device",
        "an attempt to use a privileged device",
    ),
    ("forbidden.host_path", "an attempt to access a host path"),
    (
        "forbidden.privilege_escalation",
        "an attempt to gain privileges",
    ),
    (
        "forbidden.credential_in_url",
        "a credential or token in a URL or an Authorization header",
    ),
    (
        "forbidden.runnable_command",
        "a shell command meant to be run",
    ),
    (
        "forbidden.executable_code_block",
        "a code block in a shell language",
    ),
    (
        "forbidden.pipe_to_interpreter",
        "downloaded or decoded text piped into an interpreter",
    ),
    (
        "forbidden.persistence",
        "a persistence mechanism (cron, systemd unit, init script, autostart)",
    ),
    (
        "forbidden.hierarchy_override",
        "an instruction aimed at overriding the instruction hierarchy",
    ),
    (
        "forbidden.code_to_run",
        "code meant to be run (a shell substitution, Python, SQL or a template expression)",
    ),
    (
        "forbidden.instruction_to_run",
        "an instruction to the reader to fetch or execute something",
    ),
    (
        "forbidden.binary_download",
        "a link to an executable or binary download presented as a step",
    ),
    (
        "forbidden.executable_payload",
        "an executable payload embedded inline",
    ),
    (
        "forbidden.encoded_payload",
        "an encoded blob that decodes to text (base64, hex, Morse, ROT13, ...): data for CORE is written as what it says",
    ),
    (
        "forbidden.policy_change",
        "a claim that the system policy should be changed",
    ),
];

reason_codes! {
    "request" => "The request file as a whole (`runner validate`, `runner exec`, the gate)." {
        RequestTooLarge = "request.too_large" => "The request is larger than the policy's `[request] max_bytes`.",
        RequestNotUtf8 = "request.not_utf8" => "The request is not valid UTF-8 (the line of the first bad byte is given).",
        RequestRejected = "request.rejected" => "The request was rejected: the code of the error line `runner exec` and `runner serve` print (the `--json` reasons carry the validator's own codes).",
    }
    "document" => "A tool result or research packet as a whole (the gate)." {
        DocumentTooLarge = "document.too_large" => "The document is larger than the policy's `[request] max_bytes`.",
        DocumentNotUtf8 = "document.not_utf8" => "The document is not valid UTF-8 (the line of the first bad byte is given).",
    }
    "kind" => "What kind of document the gate was handed." {
        KindUnknown = "kind.unknown" => "The document names no kind: no `request_type`, `result_type` or `packet_type`, and it is not JSON with a `schema`.",
        KindAmbiguous = "kind.ambiguous" => "The document names more than one kind, or its sections belong to more than one schema.",
    }
    "io" => "Reading a document from a directory (gate inbox, `runner serve`, `runner validate`)." {
        IoUnreadable = "io.unreadable" => "The document cannot be read.",
        IoNotRegular = "io.not_regular" => "The entry is not a regular file (a symlink, FIFO, socket, device or directory); it is never followed or read.",
        IoHardLink = "io.hard_link" => "The file has more than one hard link, so its bytes could change after judging; it is left unread.",
    }
    "text" => "Characters anywhere in a document." {
        TextControlCharacter = "text.control_character" => "A control character other than tab (and the line ending).",
        TextInvisibleCharacter = "text.invisible_character" => "An invisible character: zero-width, bidi control or similar.",
    }
    "front_matter" => "The YAML front matter's presence, keys and values." {
        FrontMatterMissing = "front_matter.missing" => "The document does not begin with a `---` line.",
        FrontMatterUnterminated = "front_matter.unterminated" => "The front matter has no closing `---` line.",
        FrontMatterUnknownKey = "front_matter.unknown_key" => "A key the document's schema does not define (also inside `content_hashes`).",
        FrontMatterMissingKey = "front_matter.missing_key" => "A required key is missing.",
        FrontMatterEmptyValue = "front_matter.empty_value" => "A required text value is empty or only invisible characters.",
        FrontMatterType = "front_matter.type" => "A value of the wrong type: a list or mapping where text is due, or a non-integer or negative number.",
        FrontMatterId = "front_matter.id" => "An identifier is not 1–128 characters of `A–Z a–z 0–9 . _ -` starting with a letter or digit.",
        FrontMatterHashFormat = "front_matter.hash_format" => "A sha256 is missing or not 64 lowercase hex characters.",
        FrontMatterTimestamp = "front_matter.timestamp" => "A timestamp is not an RFC 3339 UTC time.",
        FrontMatterSchemaVersion = "front_matter.schema_version" => "`schema_version` is not 1.",
        FrontMatterRequestType = "front_matter.request_type" => "`request_type` is not `tool_request`.",
        FrontMatterResultType = "front_matter.result_type" => "`result_type` is not `tool_result`.",
        FrontMatterPacketType = "front_matter.packet_type" => "`packet_type` is not `research_packet`.",
        FrontMatterRequestId = "front_matter.request_id" => "`request_id` is not 1–128 characters of `A–Z a–z 0–9 . _ -` starting with a letter or digit.",
        FrontMatterBackend = "front_matter.backend" => "`backend` is not `ERA` or `monty`.",
        FrontMatterNetwork = "front_matter.network" => "A request's `network` is not `none` or `allowlist`.",
        FrontMatterNetworkUsed = "front_matter.network_used" => "A result's `network_used` is not `none` or `allowlist`.",
        FrontMatterNetworkDestinations = "front_matter.network_destinations" => "A result's `network_destinations` is not a list of `host:port`, or disagrees with `network_used`.",
        FrontMatterArtifacts = "front_matter.artifacts" => "A result's `artifacts` is not a list of `{path, sha256}`, or declares a path twice.",
        FrontMatterArtifactPath = "front_matter.artifact_path" => "An artifact path is not a safe path relative to `/out` (absolute, `..` or an empty part).",
        FrontMatterSourceKind = "front_matter.source_kind" => "A packet's `source_kind` is not one of the allowed kinds.",
        FrontMatterLicense = "front_matter.license" => "A packet's `license` is not one of the allowed licenses.",
        FrontMatterAuthors = "front_matter.authors" => "A packet's `authors` is not a list of non-empty names.",
        FrontMatterPublishedDate = "front_matter.published_date" => "A packet's `published_date` is not a date `YYYY-MM-DD`.",
        FrontMatterTimestampOrder = "front_matter.timestamp_order" => "A packet's `retrieved_utc` is later than its `created_utc`.",
        FrontMatterContentHashes = "front_matter.content_hashes" => "A packet's `content_hashes` is not a mapping.",
    }
    "yaml" => "The front matter's YAML, read by a strict loader." {
        YamlSyntax = "yaml.syntax" => "The front matter is not valid YAML.",
        YamlAlias = "yaml.alias" => "A YAML alias (`*name`).",
        YamlAnchor = "yaml.anchor" => "A YAML anchor (`&name`).",
        YamlTag = "yaml.tag" => "A YAML tag (`!tag`, `!!type`).",
        YamlDuplicateKey = "yaml.duplicate_key" => "A key appears twice in one mapping.",
        YamlComplexKey = "yaml.complex_key" => "A mapping key that is not a plain string.",
        YamlNotMapping = "yaml.not_mapping" => "The front matter is empty or not a mapping of keys to values.",
        YamlTooDeep = "yaml.too_deep" => "The front matter nests deeper than the policy's `max_yaml_depth`.",
        YamlTooManyNodes = "yaml.too_many_nodes" => "The front matter has more nodes than the policy's `max_yaml_nodes`.",
        YamlMultipleDocuments = "yaml.multiple_documents" => "The front matter holds more than one YAML document.",
    }
    "approval" => "A request's approval fields and signature." {
        ApprovalRequestedBy = "approval.requested_by" => "`requested_by` is missing or empty.",
        ApprovalApprovedBy = "approval.approved_by" => "`approved_by` is missing or empty.",
        ApprovalApprovedUtc = "approval.approved_utc" => "`approved_utc` is missing or empty.",
        ApprovalBeforeCreation = "approval.before_creation" => "`approved_utc` is earlier than `created_utc`.",
        ApprovalSelfApproved = "approval.self_approved" => "The same person requested and approved, and the policy demands separation of duties.",
        ApprovalSignatureMissing = "approval.signature_missing" => "The policy requires a signed approval and the request has no signature file.",
        ApprovalSignatureInvalid = "approval.signature_invalid" => "The signature file is malformed, of another payload type, or does not verify.",
        ApprovalSignerUntrusted = "approval.signer_untrusted" => "The signing key is not among the policy's `[[approval.trusted]]` keys.",
        ApprovalSignerMismatch = "approval.signer_mismatch" => "The signing key belongs to someone other than `approved_by`.",
        ApprovalBytesChanged = "approval.bytes_changed" => "The request differs from the text that was signed.",
    }
    "draft" => "A draft judged by the MCP server's `validate_draft`." {
        DraftApprovalPreset = "draft.approval_preset" => "The draft sets `approved_by` or `approved_utc`, which only the operator writes.",
    }
    "language" => "A request's `language`." {
        LanguageShell = "language.shell" => "`language` names a shell; shell requests are refused.",
        LanguageUnknown = "language.unknown" => "`language` selects no registered guest.",
        LanguageEnvironmentOnMonty = "language.environment_on_monty" => "`language` selects a package environment, which backend monty cannot use.",
    }
    "limits" => "A request's resource limits." {
        LimitsNotPositive = "limits.not_positive" => "A limit is zero or negative.",
        LimitsOverMaximum = "limits.over_maximum" => "A limit is above the policy's maximum.",
        LimitsCpuLimitFormat = "limits.cpu_limit_format" => "`cpu_limit` is not CPU seconds such as `30` or `2.5s`.",
    }
    "network" => "Network access: the request's `network`, and the broker's refusals recorded in the network log." {
        NetworkAllowlistUnsupported = "network.allowlist_unsupported" => "`network: allowlist` is requested but the policy's `[network] allow` lists no origin.",
        NetworkSetup = "network.setup" => "The run's network door (exchange directory, broker) could not be set up.",
        NetworkOriginNotAllowed = "network.origin_not_allowed" => "The request's origin is not on the policy's allowlist.",
        NetworkBadRequest = "network.bad_request" => "The guest's request is malformed: unreadable, not the broker's JSON, an unsupported method, or too many or too large headers.",
        NetworkBadUrl = "network.bad_url" => "The request's URL cannot be parsed.",
        NetworkMaxRequests = "network.max_requests" => "The run has made more requests than the policy's `max_requests`.",
        NetworkPrivateAddress = "network.private_address" => "The origin's name resolves to a private or internal address.",
        NetworkRedirectRefused = "network.redirect_refused" => "The origin redirects to a URL not on the allowlist.",
        NetworkResponseTooLarge = "network.response_too_large" => "The response body is larger than the policy's cap.",
        NetworkTimeout = "network.timeout" => "No complete answer within the exchange's timeout (cut to what is left of the run).",
        NetworkFetchFailed = "network.fetch_failed" => "The exchange failed: TLS, connection, or the fetch could not start.",
        NetworkRunEnded = "network.run_ended" => "The guest ended, or the run's time limit passed, before the exchange finished; it was abandoned.",
        NetworkNotServed = "network.not_served" => "The guest had ended before the broker took the request; nothing was sent.",
        NetworkReplayUnrecorded = "network.replay_unrecorded" => "During a replay, the request is not the next recorded one (or its recording cannot be served).",
        NetworkRefused = "network.refused" => "A refused exchange whose log entry names no code (the Safety Notes' fallback).",
    }
    "inputs" => "A request's declared `inputs` and its `## Input Files` section." {
        InputsType = "inputs.type" => "`inputs` is not a list of `{path, sha256}` mappings.",
        InputsUnknownKey = "inputs.unknown_key" => "An input has a key other than `path` and `sha256`.",
        InputsPathMissing = "inputs.path_missing" => "An input has no `path`.",
        InputsPathOutsideIn = "inputs.path_outside_in" => "An input path (declared or named in `## Input Files`) is not under `/in/`.",
        InputsPathTraversal = "inputs.path_traversal" => "An input path climbs out with `..`.",
        InputsPathInvalid = "inputs.path_invalid" => "An input path is not a plain relative file path under `/in/`.",
        InputsHashMissing = "inputs.hash_missing" => "A declared input has no sha256.",
        InputsHashFormat = "inputs.hash_format" => "An input's sha256 is not 64 lowercase hex characters.",
        InputsDuplicatePath = "inputs.duplicate_path" => "An input path is declared twice (compared after Unicode NFC normalization).",
        InputsSectionMissingFile = "inputs.section_missing_file" => "A declared input is not listed in `## Input Files`.",
        InputsSectionUndeclaredFile = "inputs.section_undeclared_file" => "`## Input Files` lists a file the front matter does not declare.",
        InputsSectionHashMissing = "inputs.section_hash_missing" => "`## Input Files` lists a file without its sha256.",
        InputsSectionHashMismatch = "inputs.section_hash_mismatch" => "`## Input Files` gives another sha256 than the front matter.",
    }
    "body" => "The markdown body's sections and what it renders." {
        BodyMissingSection = "body.missing_section" => "A required `## ` section is missing.",
        BodyEmptySection = "body.empty_section" => "A required section is empty.",
        BodyUnknownSection = "body.unknown_section" => "A section the document's schema does not define.",
        BodyDuplicateSection = "body.duplicate_section" => "A section appears twice.",
        BodySectionOrder = "body.section_order" => "A section is out of the schema's order.",
        BodySectionTitle = "body.section_title" => "A section title differs from the schema's in case only.",
        BodySectionWrongBackend = "body.section_wrong_backend" => "A request section that belongs to the other backend.",
        BodyTextOutsideSection = "body.text_outside_section" => "Text before the first `## ` section (only a `# ` title may stand there).",
        BodyAmbiguousHeading = "body.ambiguous_heading" => "A line that renders as a heading but is not a `## Title` section to the runner.",
        BodyRawHtml = "body.raw_html" => "Raw HTML, which rendering hides or reshapes.",
        BodyRendersImage = "body.renders_image" => "A result renders an image, which a viewer fetches from its URL.",
        BodyRendersLink = "body.renders_link" => "A result renders a link.",
        BodyRendersAutolink = "body.renders_autolink" => "A result renders an autolink or email link.",
        BodyRendersHtml = "body.renders_html" => "A result renders HTML not already reported as `body.raw_html`.",
    }
    "command" => "An ERA request's `## Command`." {
        CommandCodeFence = "command.code_fence" => "The command is a code fence, not plain text.",
        CommandMultipleLines = "command.multiple_lines" => "The command is more than one line.",
        CommandEmpty = "command.empty" => "The command has no words.",
        CommandUnparseable = "command.unparseable" => "The command cannot be split into words (an unbalanced quote).",
        CommandChaining = "command.chaining" => "Command chaining: `&&`, `||` or `;`.",
        CommandPipeline = "command.pipeline" => "A pipeline: `|`.",
        CommandRedirection = "command.redirection" => "Redirection: `>` or `<`.",
        CommandHeredoc = "command.heredoc" => "A heredoc: `<<`.",
        CommandSubstitution = "command.substitution" => "Command substitution: `$(…)` or backticks.",
        CommandVariableExpansion = "command.variable_expansion" => "Variable expansion: `$NAME` or `${…}`.",
        CommandBackground = "command.background" => "A background operator: `&`.",
        CommandHostPath = "command.host_path" => "The program is a path, or an argument names a host path (outside `/in` and `/out`, `~`, `file:`).",
        CommandPathTraversal = "command.path_traversal" => "An argument climbs with `..`.",
        CommandUnknownProgram = "command.unknown_program" => "The program is not a registered guest program.",
        CommandGuestMismatch = "command.guest_mismatch" => "The program selects another guest than `language`.",
    }
    "outputs" => "Output paths: a request's `## Expected Outputs`, a result's `## Outputs`." {
        OutputsPathOutsideOut = "outputs.path_outside_out" => "A request's output path is not under `/out/`.",
        OutputsPathTraversal = "outputs.path_traversal" => "A request's output path climbs out with `..`.",
        OutputsNotListed = "outputs.not_listed" => "A result's declared artifact is not listed in `## Outputs`.",
        OutputsHashMismatch = "outputs.hash_mismatch" => "`## Outputs` gives another sha256 than the front matter's `artifacts`.",
        OutputsUndeclared = "outputs.undeclared" => "`## Outputs` lists a file the front matter's `artifacts` does not declare.",
    }
    "risk" => "A request's `## Risk Assessment`." {
        RiskMissingField = "risk.missing_field" => "A required field (`Risk level:`, `Justification:`, …) is missing.",
        RiskEmptyField = "risk.empty_field" => "A field is empty.",
        RiskLevel = "risk.level" => "`Risk level:` is not low, medium or high.",
        RiskDataSensitivity = "risk.data_sensitivity" => "`Data sensitivity:` is not public, internal or confidential.",
    }
    "monty" => "A monty request's `## Code` and `## Inputs (JSON)`." {
        MontyCodeEmpty = "monty.code_empty" => "`## Code` holds no code.",
        MontyCodeUnfenced = "monty.code_unfenced" => "`## Code` is not exactly one fenced code block.",
        MontyInputsInvalidJson = "monty.inputs_invalid_json" => "`## Inputs (JSON)` is not valid JSON.",
        MontyInputsNotObject = "monty.inputs_not_object" => "`## Inputs (JSON)` is not a JSON object.",
        MontyInputName = "monty.input_name" => "An input name is not a Python identifier (or is a keyword).",
    }
    "provenance" => "A result's `## Provenance`." {
        ProvenanceMissingField = "provenance.missing_field" => "A required statement (such as the exact command executed) is missing.",
        ProvenanceEmptyField = "provenance.empty_field" => "A statement has no value.",
    }
    "excerpt" => "A result's stdout and stderr excerpts, against the stored streams." {
        ExcerptTooLong = "excerpt.too_long" => "The excerpt quotes more lines than the policy allows.",
        ExcerptHashMismatch = "excerpt.hash_mismatch" => "The section names another sha256 than the front matter's stream hash.",
        ExcerptTruncationNoteMissing = "excerpt.truncation_note_missing" => "The stored stream is longer than the excerpt, and the section does not say it was truncated.",
        ExcerptTruncationNoteFalse = "excerpt.truncation_note_false" => "The section says the excerpt was truncated, but the stored stream is not longer.",
        ExcerptMismatch = "excerpt.mismatch" => "The excerpt's lines differ from the stored stream's.",
    }
    "artifacts" => "A result's artifact directory beside it (`NAME/out`, `stdout`, `stderr`)." {
        ArtifactsNotChecked = "artifacts.not_checked" => "A note (a reason under `--strict`): no artifact directory, so artifact and stream hashes were not re-derived.",
        ArtifactsNotDirectory = "artifacts.not_directory" => "The artifact directory, or its `out`, is not a directory.",
        ArtifactsUnreadable = "artifacts.unreadable" => "The artifact directory or a file in it cannot be opened, listed or read.",
        ArtifactsUnexpectedEntry = "artifacts.unexpected_entry" => "The artifact directory holds an entry that is not part of a result.",
        ArtifactsStreamMissing = "artifacts.stream_missing" => "The stored `stdout` or `stderr` is missing.",
        ArtifactsStreamHashMismatch = "artifacts.stream_hash_mismatch" => "The stored `stdout` or `stderr` has another sha256 than the front matter.",
        ArtifactsMissing = "artifacts.missing" => "A declared artifact is missing from `out/`.",
        ArtifactsHashMismatch = "artifacts.hash_mismatch" => "An artifact has another sha256 than the front matter.",
        ArtifactsUndeclared = "artifacts.undeclared" => "`out/` holds a file the front matter does not declare.",
        ArtifactsSymlink = "artifacts.symlink" => "An entry of `out/` is a symlink.",
        ArtifactsNotRegular = "artifacts.not_regular" => "An entry of `out/` is not a regular file (a FIFO, socket or device).",
        ArtifactsTooManyEntries = "artifacts.too_many_entries" => "`out/` holds more entries than the gate reads, or nests deeper than 32 levels.",
    }
    "safety" => "The `## Safety Notes` of a result or packet." {
        SafetyMissingStatement = "safety.missing_statement" => "A required statement is missing.",
        SafetyEmptyStatement = "safety.empty_statement" => "A statement is empty.",
        SafetyStatementIncomplete = "safety.statement_incomplete" => "The untrusted output/content statement does not say the text is untrusted and not instructions.",
        SafetyNetworkMismatch = "safety.network_mismatch" => "A result's network confirmation disagrees with `network_used` or omits a destination.",
    }
    "lock" => "A result's replay lock, checked when the result crosses the gate." {
        LockMissing = "lock.missing" => "The result's lock `X.lock.json` is not beside it.",
        LockMismatch = "lock.mismatch" => "The result, its statement or its envelope differ from what the lock implies.",
    }
    "hash" => "A packet's `content_hashes`, re-derived." {
        HashBodyMismatch = "hash.body_mismatch" => "`body_sha256` is not the hash of the packet's body.",
        HashSourcesMismatch = "hash.sources_mismatch" => "`sources_sha256` is not the hash of the packet's sources.",
    }
    "packet" => "A research packet's body." {
        PacketCodeBlock = "packet.code_block" => "A code block in a language that is not a data format.",
    }
    "citations" => "A packet's `## Citations`." {
        CitationsFormat = "citations.format" => "A line is not a citation entry such as `[C1] Author, Title, Venue, Year. URL/DOI.`; see the packet schema.",
        CitationsEmpty = "citations.empty" => "A citation has no text.",
        CitationsDuplicateLabel = "citations.duplicate_label" => "A citation label appears twice.",
        CitationsLabelSequence = "citations.label_sequence" => "Labels are not numbered C1, C2, … in order.",
        CitationsUnknownLabel = "citations.unknown_label" => "The text cites a label that `## Citations` does not have.",
    }
    "metadata" => "A packet's `## Source Metadata`." {
        MetadataMissingField = "metadata.missing_field" => "A required field is missing.",
        MetadataEmptyField = "metadata.empty_field" => "A field is empty.",
        MetadataRetrievalMethod = "metadata.retrieval_method" => "The retrieval method does not say API or HTML.",
        MetadataSourceRefMismatch = "metadata.source_ref_mismatch" => "The section does not name the front matter's `source_ref`.",
    }
    "extracted" => "Quotes in a packet." {
        ExtractedQuoteTooLong = "extracted.quote_too_long" => "A quote is longer than the packet rules allow.",
        ExtractedQuoteUnattributed = "extracted.quote_unattributed" => "A quote carries no citation label.",
    }
    "claims" => "A packet's `## Claims and Evidence`." {
        ClaimsNone = "claims.none" => "The section holds no claim block.",
        ClaimsStrayText = "claims.stray_text" => "Text outside a claim block, or a field before the first `- Claim:`.",
        ClaimsDuplicateField = "claims.duplicate_field" => "A field appears twice in one claim.",
        ClaimsMissingField = "claims.missing_field" => "A claim lacks Evidence, Confidence or Citation.",
        ClaimsEmptyField = "claims.empty_field" => "A claim's field is empty.",
        ClaimsConfidence = "claims.confidence" => "`Confidence:` is not low, medium or high.",
        ClaimsCitationFormat = "claims.citation_format" => "`Citation:` is not one or more labels such as `[C1]`.",
    }
    "stage" => "`runner exec`: staging the inputs and the run's directories." {
        StageInputMissing = "stage.input_missing" => "A declared input is not in the inputs directory.",
        StageInputSymlink = "stage.input_symlink" => "An input is a symlink.",
        StageInputNotRegular = "stage.input_not_regular" => "An input is not a regular file.",
        StageInputHardlinked = "stage.input_hardlinked" => "An input has more than one hard link.",
        StageInputHashMismatch = "stage.input_hash_mismatch" => "An input's bytes do not have the declared sha256.",
        StageInputsDir = "stage.inputs_dir" => "The inputs directory cannot be opened.",
        StageInputsDirSymlink = "stage.inputs_dir_symlink" => "The inputs directory is a symlink or not a real directory.",
        StageIo = "stage.io" => "An input cannot be copied into the run directory.",
        StageRunDir = "stage.run_dir" => "The run directory cannot be created.",
        StageOutMount = "stage.out_mount" => "The run's `/out` cannot be set up.",
        StageDeterminism = "stage.determinism" => "The run's clock start and seed cannot be drawn.",
    }
    "guest" => "`runner exec`: the guest." {
        GuestUnavailable = "guest.unavailable" => "The guest cannot be located, fetched or compiled, or a replay's pre-initialised module is not here.",
    }
    "environment" => "`runner exec`: the request's package environment." {
        EnvironmentUnavailable = "environment.unavailable" => "The package environment is not installed.",
        EnvironmentTampered = "environment.tampered" => "The package environment's tree was modified after installation.",
    }
    "backend" => "`runner exec`: the sandbox backend." {
        BackendUnavailable = "backend.unavailable" => "The monty worker cannot be found.",
        BackendFailed = "backend.failed" => "The sandbox itself failed (a guest's own failure is an outcome, not this).",
    }
    "result" => "`runner exec`: writing the result." {
        ResultDirSymlink = "result.dir_symlink" => "The results directory is a symlink or not a real directory.",
        ResultWrite = "result.write" => "The result cannot be written to the results directory.",
    }
    "sign" => "`runner exec --sign-key`." {
        SignKey = "sign.key" => "The signing key cannot be read.",
    }
    "internal" => "Bugs, reported rather than hidden." {
        InternalIncomplete = "internal.incomplete" => "The validator accepted a request with a field missing.",
        InternalPanic = "internal.panic" => "The validator panicked on the document's batch.",
    }
    "serve" => "`runner serve` with an inbox directory." {
        ServeRequestName = "serve.request_name" => "The file is not named `TR-*.md` in plain characters.",
        ServeFile = "serve.file" => "The request cannot be moved into its next directory (retried later).",
    }
    "nats" => "`runner serve --nats`." {
        NatsTmp = "nats.tmp" => "The run directory or the request file cannot be written.",
        NatsApprovalHeader = "nats.approval_header" => "The approval signature header is not base64.",
        NatsResultsBucket = "nats.results_bucket" => "The results object store cannot be read or written.",
        NatsInputsBucket = "nats.inputs_bucket" => "The inputs object store cannot be read.",
        NatsMaxDeliver = "nats.max_deliver" => "The message was delivered more than `max_deliver` times; it is given up.",
        NatsInputMissing = "nats.input_missing" => "A declared input has no object in the inputs bucket.",
        NatsInputMismatch = "nats.input_mismatch" => "An input's object holds bytes of another sha256.",
    }
    "governed" => "Governed packets (`b7-governed-packet/v1`, JSON): the reference's upper-case codes, no dot." {
        PacketNotJson = "PACKET_NOT_JSON" => "The packet is not UTF-8, not strict JSON, or not a JSON object.",
        SchemaMismatch = "SCHEMA_MISMATCH" => "`schema` is not `b7-governed-packet/v1`.",
        FieldMissing = "FIELD_MISSING" => "A required field of the packet or an item is missing.",
        FieldUnknown = "FIELD_UNKNOWN" => "A field the schema does not define.",
        FieldInvalid = "FIELD_INVALID" => "A field has the wrong type or a value outside its rules.",
        FlagAuthorityViolation = "FLAG_AUTHORITY_VIOLATION" => "The packet claims to decide or gate, or a non-binding source carries canonical precedence.",
        FlagPrecedenceViolation = "FLAG_PRECEDENCE_VIOLATION" => "Precedence contradicts the authority status, or a diagnostic item stands beside a canonical one.",
        FlagHashFormat = "FLAG_HASH_FORMAT" => "`manifest_hash` or a `content_hash` is not `sha256:` and 64 lowercase hex.",
        FlagManifestHashMismatch = "FLAG_MANIFEST_HASH_MISMATCH" => "`manifest_hash` is not the hash of the items' `named_query_id:content_hash` lines.",
        FlagContentHashMismatch = "FLAG_CONTENT_HASH_MISMATCH" => "An item's `content_hash` is not the hash re-derived with the catalog's SQL.",
        ContentHashNotChecked = "CONTENT_HASH_NOT_CHECKED" => "A note (a reason under `--strict`): no catalog was given, so content hashes were not re-derived.",
        BlockedByUnverifiedSource = "BLOCKED_BY_UNVERIFIED_SOURCE" => "The catalog has no SQL for an item's `named_query_id`.",
        FlagDuplicateItem = "FLAG_DUPLICATE_ITEM" => "Two items share a `named_query_id`.",
        NotEvidencedInAllowedSurfaces = "NOT_EVIDENCED_IN_ALLOWED_SURFACES" => "An item lacks source metadata, so it is not evidence from an allowed surface.",
        FlagLocalFirstAuthority = "FLAG_LOCAL_FIRST_AUTHORITY" => "A source names a local file instead of a database table, view or query.",
        FlagSurfaceKind = "FLAG_SURFACE_KIND" => "`surface_kind` is not `BASE TABLE` or `VIEW`.",
        FlagSourceMismatch = "FLAG_SOURCE_MISMATCH" => "`named_query_id_or_kb_path` is not the item's `named_query_id`.",
        FlagExportRoleNotReadonly = "FLAG_EXPORT_ROLE_NOT_READONLY" => "`export_operator.role` is not a read-only role.",
        FlagRawSql = "FLAG_RAW_SQL" => "A string of the packet holds raw SQL.",
    }
}

/// The reference page `docs/src/reference/reason-codes.md`: every family with its
/// codes and meanings, and the policy's `forbidden.*` codes.
pub fn reference_markdown() -> String {
    let mut out = String::from(
        "<!-- generated from runner_contract::reason; do not edit (RUNNER_WRITE_REASON_CODES=1 cargo test -p runner-contract rewrites it) -->\n\
         # Reason codes\n\n\
         Every reason the runner reports carries a stable `code` (with a message naming the \
         problem and, where there is one, the line). Codes are grouped by family, the part \
         before the dot. A code is never renamed or given another meaning; new ones may be \
         added.\n",
    );
    for (family, intro) in FAMILIES {
        let title = if *family == "governed" {
            "Governed packets".to_owned()
        } else {
            format!("`{family}.*`")
        };
        out.push_str(&format!("\n## {title}\n\n{intro}\n\n"));
        for code in ReasonCode::ALL.iter().filter(|c| c.family() == *family) {
            out.push_str(&format!("- `{}`: {}\n", code.as_str(), code.meaning()));
        }
    }
    out.push_str(
        "\n## `forbidden.*`\n\n\
         `forbidden.<rule>`: one per rule of the policy's `[[forbidden]]` list, matched against \
         the kinds of document the rule's `applies_to` names. The default policy's rules are:\n\n",
    );
    for (code, message) in DEFAULT_FORBIDDEN_RULES {
        out.push_str(&format!("- `{code}`: {message}.\n"));
    }
    out
}

#[cfg(test)]
// reason: the tests read the workspace's sources, policy and docs page, and write the
// page on request.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    /// Dotted literals of a known family that are not reason codes.
    const NOT_CODES: &[(&str, &str)] = &[(
        "outputs.artifacts_count",
        "a field of the replay lock, named in an error",
    )];

    /// File-name extensions: `request.md`, `lock.json` are files, not codes.
    const EXTENSIONS: &[&str] = &["md", "json", "sig", "toml", "txt", "csv", "py", "wasm"];

    /// Upper-case literals of the governed-packet validator that are values, not codes.
    const GOVERNED_VALUES: &[&str] = &["PACKET_DERIVED", "AS_OF_EXPORT"];

    fn workspace() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf()
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// Every `.rs` file under `src/` of the workspace's crates but this one, with its
    /// path relative to the workspace and its text.
    fn sources() -> Vec<(String, String)> {
        let root = workspace();
        let mut crates: Vec<PathBuf> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with("runner") && name != "runner-contract" && p.join("src").is_dir()
            })
            .collect();
        crates.sort();
        assert!(
            crates.len() >= 5,
            "found only {crates:?} under {}",
            root.display()
        );
        let mut files = Vec::new();
        for c in &crates {
            rust_files(&c.join("src"), &mut files);
        }
        files
            .into_iter()
            .map(|p| {
                let text = std::fs::read_to_string(&p).unwrap();
                let rel = p
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                (rel, text)
            })
            .collect()
    }

    /// The contents of every string literal-like token `"…"` made only of code characters
    /// (`a–z A–Z 0–9 _ . { }`), in order.
    fn tokens(text: &str) -> Vec<&str> {
        let bytes = text.as_bytes();
        let code_char = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'{' | b'}');
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'"' {
                let mut j = i + 1;
                while j < bytes.len() && code_char(bytes[j]) {
                    j += 1;
                }
                if j < bytes.len() && bytes[j] == b'"' && j > i + 1 {
                    out.push(&text[i + 1..j]);
                    i = j + 1;
                    continue;
                }
            }
            i += 1;
        }
        out
    }

    fn is_word(s: &str) -> bool {
        !s.is_empty()
            && s.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    }

    /// A literal that reads as a dotted reason code: `family.name`, one dot, both words.
    fn dotted(s: &str) -> Option<(&str, &str)> {
        let (family, name) = s.split_once('.')?;
        (is_word(family) && is_word(name) && !EXTENSIONS.contains(&name)).then_some((family, name))
    }

    fn is_governed_code(s: &str) -> bool {
        s.contains('_')
            && s.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
            && !GOVERNED_VALUES.contains(&s)
    }

    /// The first string literal inside each call `needle…)` in `text` (when
    /// `first_arg`, only a literal that is the call's first argument).
    fn literal_after<'a>(text: &'a str, needle: &str, first_arg: bool) -> Vec<&'a str> {
        text.match_indices(needle)
            .filter_map(|(at, _)| {
                let rest = &text[at + needle.len()..];
                let call = &rest[..rest.find(')')?];
                if first_arg && !call.trim_start().starts_with('"') {
                    return None;
                }
                let open = call.find('"')?;
                let inner = &call[open + 1..];
                Some(&inner[..inner.find('"')?])
            })
            .collect()
    }

    /// Codes the sources build with `format!`, each with the file that makes it: the
    /// front matter's `front_matter.{key}` (`Fields::constant`, `Fields::one_of`) and
    /// `{noun}.not_utf8` (`document::utf8`).
    fn formatted(files: &[(String, String)]) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (path, text) in files {
            let keys = literal_after(text, ".constant(", true).into_iter();
            for key in keys.chain(literal_after(text, ".one_of(", true)) {
                out.insert(format!("front_matter.{key}"), path.clone());
            }
            for noun in literal_after(text, "document::utf8(", false) {
                out.insert(format!("{noun}.not_utf8"), path.clone());
            }
        }
        out
    }

    /// Every code the sources hold as a literal or build with `format!`, with a file.
    fn emitted(files: &[(String, String)]) -> BTreeMap<String, String> {
        let families: BTreeSet<&str> = FAMILIES.iter().map(|(f, _)| *f).collect();
        let mut out = formatted(files);
        for (path, text) in files {
            for token in tokens(text) {
                let code = match dotted(token) {
                    Some((family, _)) => {
                        families.contains(family) && !NOT_CODES.iter().any(|(c, _)| *c == token)
                    }
                    None => path.contains("governed") && is_governed_code(token),
                };
                if code {
                    out.entry(token.to_owned()).or_insert_with(|| path.clone());
                }
            }
        }
        out
    }

    #[test]
    fn every_code_the_sources_emit_is_a_variant() {
        let files = sources();
        let missing: Vec<String> = emitted(&files)
            .into_iter()
            .filter(|(code, _)| ReasonCode::from_code(code).is_none())
            .map(|(code, path)| format!("{code} (in {path})"))
            .collect();
        assert!(
            missing.is_empty(),
            "reason codes in the sources without a ReasonCode variant (add them to runner-contract/src/reason.rs, or to NOT_CODES if they are no reason code): {missing:#?}"
        );
    }

    #[test]
    fn code_building_format_strings_are_the_known_ones() {
        // A new `format!("family.{x}")` or `format!("{x}.name")` would make codes the
        // literal scan cannot see: each must be taught to `formatted`.
        let families: BTreeSet<&str> = FAMILIES.iter().map(|(f, _)| *f).collect();
        let names: BTreeSet<&str> = ReasonCode::ALL
            .iter()
            .filter_map(|c| c.as_str().split_once('.').map(|(_, n)| n))
            .collect();
        let known = ["front_matter.{key}", "{noun}.not_utf8"];
        // Format strings that look like codes and are not.
        let not_codes = ["{RESULTS_SUBJECT_PREFIX}.rejected"]; // a NATS subject
        let mut unknown = Vec::new();
        for (path, text) in &sources() {
            for token in tokens(text) {
                let Some((left, right)) = token.split_once('.') else {
                    continue;
                };
                let builds = (families.contains(left) && right.starts_with('{'))
                    || (left.starts_with('{') && left.ends_with('}') && names.contains(right));
                if builds && !known.contains(&token) && !not_codes.contains(&token) {
                    unknown.push(format!("{token} (in {path})"));
                }
            }
        }
        assert!(
            unknown.is_empty(),
            "format strings that build reason codes the test does not know: {unknown:#?}"
        );
    }

    #[test]
    fn every_variant_is_emitted_somewhere() {
        let emitted = emitted(&sources());
        let dead: Vec<&str> = ReasonCode::ALL
            .iter()
            .map(|c| c.as_str())
            .filter(|c| !emitted.contains_key(*c))
            .collect();
        assert!(
            dead.is_empty(),
            "ReasonCode variants that no source file emits (remove them, or teach the scan how they are built): {dead:?}"
        );
    }

    #[test]
    fn codes_are_unique_and_in_their_family() {
        let mut seen = BTreeSet::new();
        for c in ReasonCode::ALL {
            assert!(seen.insert(c.as_str()), "{} is listed twice", c.as_str());
            match c.as_str().split_once('.') {
                Some((family, _)) => assert_eq!(family, c.family(), "{}", c.as_str()),
                None => assert_eq!(c.family(), "governed", "{}", c.as_str()),
            }
            assert!(
                c.meaning().ends_with('.'),
                "{}: a meaning is a sentence",
                c.as_str()
            );
        }
        let families: BTreeSet<&str> = ReasonCode::ALL.iter().map(|c| c.family()).collect();
        assert_eq!(families.len(), FAMILIES.len(), "a family without codes");
    }

    #[test]
    fn default_forbidden_rules_are_the_default_policys() {
        let path = workspace().join("policies/default.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        // Each rule is `[[forbidden]]`, then `code = "…"` and `message = "…"`.
        let mut in_policy: Vec<(String, String)> = Vec::new();
        for block in text.split("[[forbidden]]").skip(1) {
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(&format!("{name} = \"")))
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or_else(|| {
                        panic!("a [[forbidden]] rule of {} has no {name}", path.display())
                    })
                    .to_owned()
            };
            let (code, message) = (field("code"), field("message"));
            if !in_policy.iter().any(|(c, _)| *c == code) {
                in_policy.push((code, message));
            }
        }
        let listed: Vec<(String, String)> = DEFAULT_FORBIDDEN_RULES
            .iter()
            .map(|(c, m)| ((*c).to_owned(), (*m).to_owned()))
            .collect();
        assert_eq!(
            listed,
            in_policy,
            "DEFAULT_FORBIDDEN_RULES must list {}'s rules (code, first message) in order",
            path.display()
        );
    }

    #[test]
    fn the_reference_page_is_generated() {
        let path = workspace().join("docs/src/reference/reason-codes.md");
        let want = reference_markdown();
        if std::env::var_os("RUNNER_WRITE_REASON_CODES").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let found = std::fs::read_to_string(&path).unwrap_or_default();
        let first_difference = found
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .map_or(found.lines().count().min(want.lines().count()), |i| i)
            + 1;
        assert!(
            found == want,
            "{} is not what runner_contract::reason::reference_markdown renders (first difference on line {first_difference}); run `RUNNER_WRITE_REASON_CODES=1 cargo test -p runner-contract reason` to rewrite it",
            path.display()
        );
    }

    #[test]
    fn codes_serialise_as_their_dotted_strings() {
        for (code, text) in [
            (ReasonCode::YamlAlias, "yaml.alias"),
            (
                ReasonCode::StageInputHashMismatch,
                "stage.input_hash_mismatch",
            ),
            (
                ReasonCode::FrontMatterRequestType,
                "front_matter.request_type",
            ),
            (ReasonCode::FlagRawSql, "FLAG_RAW_SQL"),
        ] {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<ReasonCode>(&json).unwrap(), code);
            assert_eq!(code.to_string(), text);
            assert_eq!(ReasonCode::from_code(text), Some(code));
        }
        assert!(serde_json::from_str::<ReasonCode>("\"forbidden.secret\"").is_err());
        assert!(serde_json::from_str::<ReasonCode>("\"YamlAlias\"").is_err());
    }
}
