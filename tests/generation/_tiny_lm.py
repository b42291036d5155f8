"""A tiny random Llama with a tokenizer trained here (no hub): a model directory as a user has."""

from __future__ import annotations

from pathlib import Path

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "exporting models to onnx and executorch is what this toolkit does",
    "a small language model writes a few words after the prompt",
    "hello world, generation from exported graphs needs no eager model",
] * 20
VOCAB = 160
SPECIALS = ("<pad>", "<s>", "</s>")


def train_tokenizer():
    """A byte-level BPE fast tokenizer of at most :data:`VOCAB` tokens; ``<s>`` starts each
    encoding, ``<pad>`` = 0, ``<s>`` = 1, ``</s>`` = 2."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=list(SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()[:100])
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>",
                                   eos_token="</s>")


def write_tiny_llama(path: Path, max_positions: int = 96) -> Path:
    """``save_pretrained`` of a 2-layer Llama (hidden 32, vocab :data:`VOCAB`) and its tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = train_tokenizer()
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=max_positions, pad_token_id=0, bos_token_id=1,
                         eos_token_id=2, architectures=["LlamaForCausalLM"])
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _tokenizer_ending_with_eos():
    """:func:`train_tokenizer` with a template that ends each encoding with ``</s>`` (an
    encoder's source, as T5's tokenizer writes it) instead of starting it with ``<s>``."""
    from tokenizers import processors

    tokenizer = train_tokenizer()
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", special_tokens=[("</s>", 2)])
    return tokenizer


def write_tiny_t5(path: Path) -> Path:
    """``save_pretrained`` of a 2-layer T5 (d_model 32, vocab :data:`VOCAB`; the decoder starts
    from ``<pad>`` = 0, EOS ``</s>`` = 2) and its tokenizer."""
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                      decoder_start_token_id=0, pad_token_id=0, eos_token_id=2,
                      architectures=["T5ForConditionalGeneration"])
    torch.manual_seed(0)
    T5ForConditionalGeneration(config).eval().save_pretrained(path)
    _tokenizer_ending_with_eos().save_pretrained(path)
    return path


def write_tiny_whisper(path: Path) -> Path:
    """``save_pretrained`` of a 2-layer Whisper (16 mel bins x 64 frames, vocab :data:`VOCAB`,
    64 decoder positions; the decoder starts from ``<s>`` = 1) and a tokenizer for its output."""
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    config = WhisperConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
                           encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                           decoder_ffn_dim=64, num_mel_bins=16, max_source_positions=32,
                           max_target_positions=64, decoder_start_token_id=1, pad_token_id=0,
                           eos_token_id=2, bos_token_id=1, suppress_tokens=None,
                           begin_suppress_tokens=None, architectures=["WhisperForConditionalGeneration"])
    torch.manual_seed(0)
    WhisperForConditionalGeneration(config).eval().save_pretrained(path)
    train_tokenizer().save_pretrained(path)
    return path
