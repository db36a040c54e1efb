// SPDX-License-Identifier: MIT
/**
 * @file questions.h
 * @brief The chapters' checkable questions and their answers, computed by
 *        the engine's own functions (never typed), for `grade --answers`.
 *
 * Each chapter ends with a few questions whose answer is one number the
 * learner computes from the chapter's formulas: the KV bytes of a model, the
 * intensity of a GEMM, the blocks or chunks the scheduler gives a request.
 * The answer key evaluates the same formulas through the engine (perf/work.h,
 * the KVCacheManager, the Scheduler, the attention traffic counts), so a
 * change to the engine that changes an answer changes the key with it.
 * Some questions are choices, answered with the number the text gives each
 * option ("1 for memory, 2 for compute"). `answer_key` prints the key as
 * JSON; its output is saved as tests/labs/answers_key.json (a tools test
 * checks it is current), which tools/grade.py compares a learner's answer
 * file with, so checking answers needs no build.
 */
#pragma once

#include <string>
#include <vector>

namespace servelab::lab {

/// One checkable question.
struct Question {
  std::string id;     ///< stable name the answer file uses, e.g. "02.kv_llama70b_8k_gb"
  int lab = 0;        ///< the chapter that asks it (1..7)
  std::string text;   ///< the question as the chapter prints it, with the unit of the answer
  double answer = 0;  ///< the expected number, in the unit the text asks for
  /// Accepted relative error: |given − answer| ≤ rel_tolerance · |answer|; 0 = exactly (counts, blocks, steps).
  double rel_tolerance = 0;
};

/**
 * @brief Every lab's checkable questions, lab by lab, with their answers.
 * @throws Error when an engine function they call fails (a starter tree's
 *         unimplemented solution throws "not implemented: lab NN, ...").
 */
std::vector<Question> answer_key();

}  // namespace servelab::lab
