// SPDX-License-Identifier: MIT
#include <iomanip>
#include <iostream>

#include "command.h"
#include "config/model_config.h"

namespace servelab::cli {

namespace {

int run_presets() {
  std::cout << "| preset | arch | params (M) | layers | hidden | heads | kv heads | head_dim | vocab |\n"
            << "|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& name : preset_names()) {
    const ModelConfig c = preset(name);
    std::cout << "| " << name << " | " << arch_name(c.arch) << " | " << std::fixed << std::setprecision(1)
              << c.num_parameters() / 1e6 << " | " << c.num_hidden_layers << " | " << c.hidden_size << " | "
              << c.num_attention_heads << " | " << c.num_key_value_heads << " | " << c.head_dim << " | " << c.vocab_size
              << " |\n";
  }
  return 0;
}

}  // namespace

Command add_presets_command(CLI::App& app) {
  auto* presets = app.add_subcommand("presets", "list the named model shapes");
  return {presets, [] { return run_presets(); }};
}

}  // namespace servelab::cli
