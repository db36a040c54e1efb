// SPDX-License-Identifier: MIT
/**
 * @file answer_key.cpp
 * @brief `answer_key`: prints the chapters' checkable questions and their
 *        answers (common/questions.h), for tools/grade.py and for the chapters.
 *
 *   answer_key              the key as JSON on stdout (what `grade --answers` reads)
 *   answer_key --lab 02     lab 02's questions as the Markdown list its chapter ends with
 */
#include <iostream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "lab.h"
#include "questions.h"

using namespace servelab;
using namespace servelab::lab;

int main(int argc, char** argv) {
  CLI::App app{"The chapters' checkable questions and their answers", "answer_key"};
  int lab = 0;
  app.add_option("--lab", lab, "print this lab's questions as Markdown instead of the JSON key")
      ->check(CLI::Range(1, 99));
  return run_lab(app, argc, argv, [&] {
    const std::vector<Question> key = answer_key();
    if (lab == 0) {
      nlohmann::json questions = nlohmann::json::array();
      for (const Question& q : key)
        questions.push_back(
            {{"id", q.id}, {"lab", q.lab}, {"text", q.text}, {"answer", q.answer}, {"rel_tolerance", q.rel_tolerance}});
      std::cout << nlohmann::json{{"questions", questions}}.dump(2) << "\n";
      return;
    }
    int asked = 0;
    for (const Question& q : key)
      if (q.lab == lab) std::cout << ++asked << ". `" << q.id << "`: " << q.text << "\n";
    check(asked > 0, "--lab ", lab, ": no checkable question for this lab");
  });
}
