/**
 * The ChatML-style chat templates speech processors fall back on when a folder ships none,
 * restated as Jinja that renders the same text: a default system turn, each audio part as
 * `audioPart` (the audio bos / placeholder / eos triple, with whatever numbering the
 * processor adds), text parts verbatim, then the assistant header. `audioTest` is the
 * Jinja test that tells an audio part, as the processor writes it.
 */
export const chatTurnsTemplate = (audioPart: string, audioTest: string): string =>
  '{% set audio_count = namespace(value=0) %}{% for message in messages %}' +
  "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}" +
  "<|im_start|>{{ message['role'] }}\n" +
  "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n" +
  "{% else %}{% for part in message['content'] %}" +
  `{% if ${audioTest} %}{% set audio_count.value = audio_count.value + 1 %}${audioPart}` +
  "{% elif 'text' in part %}{{ part['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}" +
  '{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}';
