"""A plain TRL GRPO script with HarnessRL added.

HarnessRL adds a harness-driven dataset, the rubric reward, and the callback that pauses at checkpoints so the
evolver can repair the harness.

    python examples/own_trl_script.py --run-dir runs/own-script --max-steps 4

Everything HarnessRL-specific is the four lines marked `# HarnessRL`; the rest is what a TRL user writes.
"""

from __future__ import annotations

import argparse

from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig

from trainer.api import harness_parts  # HarnessRL
from trainer.policy_models import resolve_model

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--config", default="configs/tiny.yaml", help="HarnessRL run config (suite, evolver, critic)")
parser.add_argument("--model", default="tiny", help="'tiny' (test model), 'smollm2', or a model folder")
parser.add_argument("--run-dir", default="runs/own-script")
parser.add_argument("--max-steps", type=int, default=4)
args = parser.parse_args()

model_dir = resolve_model(args.model)
tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
model = AutoModelForCausalLM.from_pretrained(model_dir)

parts = harness_parts(
    args.config,
    run_dir=args.run_dir,
    max_steps=args.max_steps,  # HarnessRL
    model__name=args.model,
)
grpo = GRPOConfig(
    output_dir=f"{args.run_dir}/checkpoints",
    max_steps=args.max_steps,
    learning_rate=1e-4,
    per_device_train_batch_size=parts.cfg.train.batch_size,
    num_generations=parts.cfg.train.num_generations,
    max_completion_length=parts.cfg.train.max_completion_length,
    save_steps=parts.cfg.train.save_steps,
    shuffle_dataset=False,
    use_cpu=True,
    bf16=False,
    report_to="none",
    logging_steps=1,
)
trainer = parts.trainer_class(model=model, processing_class=tokenizer, args=grpo, **parts.trainer_kwargs())  # HarnessRL
parts.attach(trainer)  # HarnessRL
trainer.train()
parts.close()
print(f"harness version after training: v{parts.run.state.version}; run folder: {args.run_dir}")
