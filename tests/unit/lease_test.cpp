// The queue's tickets: what a waiting job writes, and what others accept from a file in the queue
// folder (anything else is ignored, so it can block nobody).
#include <gtest/gtest.h>

#include "lease_queue.hpp"

using gpusel::detail::format_ticket;
using gpusel::detail::parse_ticket;
using gpusel::detail::TicketRequest;

TEST(Ticket, RoundTrip) {
  const TicketRequest r{2, {"GPU-aaaa", "GPU-bbbb", "GPU-cccc"}, "free:2"};
  const auto back = parse_ticket(format_ticket(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->need, 2);
  EXPECT_EQ(back->gpus, r.gpus);
  EXPECT_EQ(back->what, "free:2");
}

TEST(Ticket, AnythingElseIsNotATicket) {
  for (const char* text : {
           "",
           "need 1\nwhat free:1\ngpu GPU-a\n",                           // no first line
           "gpusel-ticket 2\nneed 1\nwhat free:1\ngpu GPU-a\n",          // another version
           "gpusel-ticket 1\nneed 0\nwhat free:0\ngpu GPU-a\n",          // nothing needed
           "gpusel-ticket 1\nneed 2\nwhat free:2\ngpu GPU-a\n",          // more than it could use
           "gpusel-ticket 1\nneed 1\nwhat free:1\ngpu ../etc/passwd\n",  // not a UUID
           "gpusel-ticket 1\nneed 1\nwhat free:1\ngpu GPU-a",            // no final newline
           "gpusel-ticket 1\nneed 1\nneed 1\nwhat x\ngpu GPU-a\n",       // twice
           "gpusel-ticket 1\nneed 1\nwhat x\ngpu GPU-a\nextra line\n",   // unknown line
           "gpusel-ticket 1\nneed -1\nwhat x\ngpu GPU-a\n",
           "gpusel-ticket 1\nneed 99999\nwhat x\ngpu GPU-a\n",
       }) {
    EXPECT_FALSE(parse_ticket(text)) << text;
  }
}

TEST(Ticket, WhatIsEscapedForTerminals) {
  const auto t = parse_ticket("gpusel-ticket 1\nneed 1\nwhat \x1b[2J\xc2\x9b\ngpu GPU-a\n");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->what, "\\x1b[2J\\xc2\\x9b");
}
