import time, numpy as np, dataflow as df
df.enable_eager_execution()
rng = np.random.RandomState(0)
X = rng.randn(640, 64).astype(np.float32); Y = rng.randint(0, 10, 640)

class MLP:
    def __init__(self, seed):
        r = np.random.RandomState(seed)
        self.w1 = df.Variable(r.randn(64, 64).astype(np.float32) * 0.1)
        self.b1 = df.Variable(np.zeros(64, np.float32))
        self.w2 = df.Variable(r.randn(64, 10).astype(np.float32) * 0.1)
        self.b2 = df.Variable(np.zeros(10, np.float32))
        self.opt = df.train.AdamOptimizer(0.01)
    def step(self, x, y):
        with df.GradientTape() as tape:
            h = df.nn.relu(df.matmul(x, self.w1) + self.b1)
            logits = df.matmul(h, self.w2) + self.b2
            loss = df.reduce_mean(df.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        vs = [self.w1, self.b1, self.w2, self.b2]
        grads = tape.gradient(loss, vs)
        self.opt.apply_gradients(zip(grads, vs))
        return loss

def run(mode, n=20):
    m = MLP(1)
    f = df.function(m.step, mode=mode)
    losses = []
    for i in range(n):
        j = (i % 10) * 64
        losses.append(float(f(df.constant(X[j:j+64]), df.constant(Y[j:j+64]))))
    return losses, f
le, fe = run("eager"); lg, fg = run("graph")
print(np.max(np.abs(np.array(le)-np.array(lg))), fe.stats, fg.stats)
for mode in ("eager", "graph"):
    m = MLP(1); f = df.function(m.step, mode=mode)
    xs, ys = df.constant(X[:64]), df.constant(Y[:64])
    for _ in range(5): f(xs, ys)
    ts = []
    for _ in range(50):
        t = time.perf_counter(); f(xs, ys); ts.append(time.perf_counter() - t)
    print(mode, np.median(ts) * 1e3, "ms", f.stats)
