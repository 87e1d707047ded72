#pragma once
// Umbrella header: learning-rate schedules, the optimizer interface with minimize(), and the
// optimizers (Adafactor, Adam, SGD).

#include <mtk/optim/adafactor.hpp>
#include <mtk/optim/adam.hpp>
#include <mtk/optim/optimizer.hpp>
#include <mtk/optim/schedule.hpp>
#include <mtk/optim/sgd.hpp>
