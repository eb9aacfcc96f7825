/**
 * The chat templates the Qwen processors fall back on when a folder ships none, restated
 * as Jinja that renders the same text: a default system turn, each audio part as the
 * `<|audio_bos|><|AUDIO|><|audio_eos|>` triple (Qwen2-Audio numbers it "Audio k: " and ends
 * its line), text parts verbatim, then the assistant header.
 */
const turns = (audioPart: string, audioTest: string) =>
  '{% set audio_count = namespace(value=0) %}{% for message in messages %}' +
  "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}" +
  "<|im_start|>{{ message['role'] }}\n" +
  "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n" +
  "{% else %}{% for part in message['content'] %}" +
  `{% if ${audioTest} %}{% set audio_count.value = audio_count.value + 1 %}${audioPart}` +
  "{% elif 'text' in part %}{{ part['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}" +
  '{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}';

export const QWEN2_5_OMNI_TEMPLATE = turns(
  '{% if add_audio_id %}Audio {{ audio_count.value }}: {% endif %}<|audio_bos|><|AUDIO|><|audio_eos|>',
  "part['type'] == 'audio' or 'audio' in part or 'audio_url' in part",
);

export const QWEN2_AUDIO_TEMPLATE = turns(
  'Audio {{ audio_count.value }}: <|audio_bos|><|AUDIO|><|audio_eos|>\n',
  "'audio' in part or 'audio_url' in part or part['type'] == 'audio'",
);
