"""Reference prompt ids for the three backbones, built the way the upstream code builds them,
for checking the TypeScript prompt recipes (src/model/text/prompt.ts, the family records).

Independent of the TypeScript: the Qwen prompts render the folder's chat template with
jinja2 (settings as transformers' chat-template renderer uses them) over the conversation
the processor receives, expand the audio placeholder to N copies as the processors do, and
tokenize with special tokens split off first (as a Hugging Face tokenizer does) and the
plain text encoded by tokenizers.py's reference encoder. Voxtral's prompts follow
mistral-common's InstructTokenizerV7: a transcription request is
<s>[INST][BEGIN_AUDIO][AUDIO]xN[/INST] (+ "lang:xx") [TRANSCRIBE]; a chat request with an
audio chunk then a text chunk is <s>[INST][BEGIN_AUDIO][AUDIO]xN{text}[/INST] (system
messages are refused when audio is present).

The instruction texts are the upstream recipes: Qwen2.5-Omni's cookbook (speech recognition
and speech translation), Qwen2-Audio's evaluation prompt ("Detect the language and
recognize the speech: <|en|>") and its translation form; Voxtral's translation has no
stated wording, so its request asks in words ("Translate this audio into French.").

Stop ids: the released generation_config.json eos_token_id lists (Qwen) and Tekken's eos
(Voxtral), with the tokenizer's eos token reported apart.

Conversations over one recording (prompts.py turns): every request of a recording shares
one system message (Qwen2.5-Omni: the speech recognition one; Qwen2-Audio: none, so the
template's default), so all share the ids up to the end of the audio. A question asked
after a question continues that conversation: the previous request's whole prompt, the
answer's ids as the model produced them (never re-tokenized), then the next turn as the
upstream code writes it after an assistant message: mistral-common's "</s>[INST]{q}[/INST]",
or what the chat template renders after the assistant's content up to the next generation
prompt. Any other request (a transcription, a translation, a first question) starts from
the audio.

CLI:
  prompts.py ids TOKENIZER_DIR FAMILY N TASK LANGUAGE TARGET [TASK LANGUAGE TARGET ...]
      one JSON object {"ids", "stop", "eos"} per case, for N audio tokens; FAMILY voxtral,
      qwen2_audio or qwen2_5_omni, TASK transcribe|translate, LANGUAGE a code or none,
      TARGET a code or - for none. The chat templates need jinja2 (python3-jinja2).
  prompts.py turns TOKENIZER_DIR FAMILY N REQUESTS_JSON
      one JSON object {"ids"} per request of the conversation, its whole prompt: REQUESTS_JSON
      is a list of {"task": transcribe|translate|ask, "language", "target", "question",
      "fresh", "answer": [ids]} (language/target null for none; "answer" the ids the model
      answered this request with, fed to the next question).
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizers import encode_qwen, encode_tekken  # noqa: E402

NAMES = {"en": "English", "fr": "French", "de": "German", "zh": "Chinese"}

# generation_config.json of Qwen2-Audio-7B-Instruct and Qwen2.5-Omni-3B: eos_token_id.
GENERATION_EOS = {"qwen2_audio": [151643, 151645], "qwen2_5_omni": [151645, 151643]}


def qwen_conversation(family, task, language, target):
    """The messages a Qwen processor's apply_chat_template receives for the request."""
    audio = {"type": "audio", "audio_url": "speech.wav"}
    name = NAMES.get(language, language) if language else None
    if family == "qwen2_5_omni":
        if task == "transcribe":
            system = "You are a speech recognition model."
            text = "Transcribe the %saudio into text without any punctuation marks." % (name + " " if name else "")
        else:
            system = "You are a speech translation model."
            text = "Listen to the provided %sspeech and produce a translation in %s text." % (
                name + " " if name else "", NAMES.get(target, target))
        return [{"role": "system", "content": [{"type": "text", "text": system}]},
                {"role": "user", "content": [audio, {"type": "text", "text": text}]}]
    if task == "transcribe":
        text = "Detect the language and recognize the speech:"
    else:
        text = "Detect the language and translate the speech into %s:" % NAMES.get(target, target)
    if language:
        text += " <|%s|>" % language
    return [{"role": "user", "content": [audio, {"type": "text", "text": text}]}]


def read_chat_template(folder):
    path = os.path.join(folder, "chat_template.json")
    if os.path.exists(path):
        return _load(path)["chat_template"]
    return _load(os.path.join(folder, "tokenizer_config.json"))["chat_template"]


def render(template, messages):
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    return env.from_string(template).render(messages=messages, add_generation_prompt=True)


def hf_encode(tokenizer_json, text):
    """tokenizer(text): added tokens matched first, the text between them BPE-encoded."""
    added = {t["content"]: t["id"] for t in tokenizer_json["added_tokens"]}
    pattern = "(" + "|".join(re.escape(s) for s in sorted(added, key=len, reverse=True)) + ")"
    ids = []
    for i, piece in enumerate(re.split(pattern, text)):
        if i % 2:
            ids.append(added[piece])
        elif piece:
            ids += encode_qwen(tokenizer_json, piece)
    return ids


def qwen_ids(folder, family, n, task, language, target):
    config = _load(os.path.join(folder, "tokenizer_config.json"))
    audio = config.get("audio_token", "<|AUDIO|>")
    text = render(read_chat_template(folder), qwen_conversation(family, task, language, target))
    assert text.count(audio) == 1, text
    tok = _load(os.path.join(folder, "tokenizer.json"))
    ids = hf_encode(tok, text.replace(audio, audio * n))
    eos = hf_encode(tok, config["eos_token"])
    assert len(eos) == 1
    return {"ids": ids, "stop": GENERATION_EOS[family], "eos": eos[0]}


def voxtral_ids(folder, n, task, language, target):
    tekken = _load(os.path.join(folder, "tekken.json"))
    special = {s["token_str"]: s["rank"] for s in tekken["special_tokens"]}
    user = [special["[INST]"], special["[BEGIN_AUDIO]"]] + [special["[AUDIO]"]] * n
    if task == "transcribe":
        tail = [special["[/INST]"]]
        if language:
            tail += encode_tekken(tekken, "lang:%s" % language)
        tail.append(special["[TRANSCRIBE]"])
    else:
        source = NAMES.get(language, language) + " " if language else ""
        ask = "Translate this %saudio into %s." % (source, NAMES.get(target, target))
        tail = encode_tekken(tekken, ask) + [special["[/INST]"]]
    return {"ids": [special["<s>"]] + user + tail, "stop": [special["</s>"]], "eos": special["</s>"]}


SESSION_SYSTEM = {"qwen2_5_omni": "You are a speech recognition model.", "qwen2_audio": None}
ANSWER = "\x00answer\x00"


def voxtral_turns(folder, n, requests):
    tekken = _load(os.path.join(folder, "tekken.json"))
    special = {s["token_str"]: s["rank"] for s in tekken["special_tokens"]}
    audio = [special["<s>"], special["[INST]"], special["[BEGIN_AUDIO]"]] + [special["[AUDIO]"]] * n
    out, prev = [], None
    for r in requests:
        if r["task"] == "ask":
            question = encode_tekken(tekken, r["question"]) + [special["[/INST]"]]
            if prev is not None and prev[0]["task"] == "ask" and not r.get("fresh"):
                ids = prev[1] + prev[0]["answer"] + [special["</s>"], special["[INST]"]] + question
            else:
                ids = audio + question
        else:
            ids = voxtral_ids(folder, n, r["task"], r.get("language"), r.get("target"))["ids"]
        out.append(ids)
        prev = (r, ids)
    return out


def qwen_turns(folder, family, n, requests):
    config = _load(os.path.join(folder, "tokenizer_config.json"))
    audio_token = config.get("audio_token", "<|AUDIO|>")
    tok = _load(os.path.join(folder, "tokenizer.json"))
    template = read_chat_template(folder)
    system = SESSION_SYSTEM[family]
    head = [{"role": "system", "content": [{"type": "text", "text": system}]}] if system else []
    audio = {"type": "audio", "audio_url": "speech.wav"}
    out, prev = [], None
    for r in requests:
        if r["task"] == "ask":
            text = r["question"]
        else:
            text = qwen_conversation(family, r["task"], r.get("language"), r.get("target"))[-1]["content"][1]["text"]
        follow = prev is not None and prev[0]["task"] == "ask" and r["task"] == "ask" and not r.get("fresh")
        if follow:
            # The conversation so far with the answer as a marker, whose ids are spliced in as produced.
            messages = prev[2] + [{"role": "assistant", "content": ANSWER},
                                  {"role": "user", "content": [{"type": "text", "text": text}]}]
            rendered = render(template, messages)
            after = rendered[rendered.rindex(ANSWER) + len(ANSWER):]
            ids = prev[1] + prev[0]["answer"] + hf_encode(tok, after)
        else:
            messages = head + [{"role": "user", "content": [audio, {"type": "text", "text": text}]}]
            rendered = render(template, messages)
            assert rendered.count(audio_token) == 1, rendered
            ids = hf_encode(tok, rendered.replace(audio_token, audio_token * n))
        out.append(ids)
        prev = (r, ids, messages)
    return out


def _load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main(argv):
    if argv[:1] == ["turns"] and len(argv) == 5:
        folder, family, n, requests = argv[1], argv[2], int(argv[3]), json.loads(argv[4])
        turns = voxtral_turns(folder, n, requests) if family == "voxtral" else qwen_turns(folder, family, n, requests)
        for ids in turns:
            print(json.dumps({"ids": ids}))
        return 0
    if argv[:1] != ["ids"] or len(argv) < 7 or (len(argv) - 4) % 3:
        print(__doc__, file=sys.stderr)
        return 2
    folder, family, n = argv[1], argv[2], int(argv[3])
    for i in range(4, len(argv), 3):
        task, language, target = argv[i:i + 3]
        language = None if language == "none" else language
        target = None if target == "-" else target
        if family == "voxtral":
            out = voxtral_ids(folder, n, task, language, target)
        else:
            out = qwen_ids(folder, family, n, task, language, target)
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
