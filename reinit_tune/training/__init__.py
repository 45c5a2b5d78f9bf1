"""Training: the one loop (``loop``) and what it trains: a finetuned sequence classifier
(``finetune``), a linear probe on frozen features (``probe``), an intermediate task before the
final one (``sequential``); ``vocab_rows`` is the loop's exact embedding-update shortcut."""
