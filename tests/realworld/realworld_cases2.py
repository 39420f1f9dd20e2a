"""The second corpus: libraries and patterns the first one does not use.

diffusers, torchmetrics, torch_geometric, sentence-transformers, lightning and einops,
and the patterns of issue 17: tensors in plain holders (slots, attrs, pydantic, private
stores, closures, tuples in dicts), frames tied back to the namespace, cell wrappers,
exceptions that wrap the device error, the message's own demands, targets among the
devices the message names, owners over aliases, ``torch.compile``, and fixes right in
substance. Each case cites the public report it is modelled on (none of the first
corpus's); ``classes`` says which classes of issue 17 it exercises (0: a baseline).
A case the package gets wrong today carries ``xfail="class N: ..."``.
"""

from __future__ import annotations

from realworld import Case

UNET = """
        from diffusers import UNet2DModel, DDPMScheduler
        unet = UNet2DModel(sample_size=8, in_channels=1, out_channels=1, layers_per_block=1,
                           block_out_channels=(8, 16), norm_num_groups=4,
                           down_block_types=('DownBlock2D', 'DownBlock2D'),
                           up_block_types=('UpBlock2D', 'UpBlock2D'))
        scheduler = DDPMScheduler(num_train_timesteps=100)
"""

SBERT = """
        from sentence_transformers import SentenceTransformer, util
        from sentence_transformers.models import Pooling, WordEmbeddings
        from sentence_transformers.models.tokenizer import WhitespaceTokenizer
        vocab = ['the', 'a', 'cat', 'dog', 'sat', 'on', 'mat', 'good', 'movie']
        words = WordEmbeddings(WhitespaceTokenizer(vocab), torch.randn(len(vocab), 16))
        sbert = SentenceTransformer(modules=[words, Pooling(16)], device='cpu')
"""

GCN = """
        from torch_geometric.data import Data
        from torch_geometric.nn import GCNConv

        class GCN(nn.Module):
            def __init__(self, d_in, d_hidden, n_classes):
                super().__init__()
                self.conv1 = GCNConv(d_in, d_hidden, add_self_loops=False, normalize=False)
                self.conv2 = GCNConv(d_hidden, n_classes, add_self_loops=False, normalize=False)

            def forward(self, x, edge_index):
                return self.conv2(self.conv1(x, edge_index).relu(), edge_index)

        edge_index = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
        data = Data(x=torch.randn(4, 3), edge_index=edge_index, y=torch.tensor([0, 1, 0, 1]))
"""

CASES: list[Case] = [
    # -- libraries: diffusers ---------------------------------------------------------
    Case(
        id="diffusers-unet-timesteps-on-cpu",
        url="https://github.com/da03/markup2im/issues/2",
        classes=(2,),
        setup=UNET
        + """
        unet = unet.to('cuda')
        noisy = torch.randn(2, 1, 8, 8, device='cuda')
        timesteps = torch.randint(0, 100, (2,))
        """,
        cell="noise_pred = unet(noisy, timesteps).sample\n",
        culprit="timesteps",
        checks=("noise_pred",),
        needs=("diffusers",),
    ),
    Case(
        id="diffusers-add-noise-with-cpu-noise",
        url="https://github.com/rohitgandikota/sliders/issues/20",
        classes=(2,),
        setup=UNET
        + """
        clean = torch.randn(2, 1, 8, 8, device='cuda')
        timesteps = torch.randint(0, 100, (2,), device='cuda')
        noise = torch.randn(clean.shape)
        """,
        cell="noisy = scheduler.add_noise(clean, noise, timesteps)\n",
        culprit="noise",
        checks=("noisy",),
        needs=("diffusers",),
    ),
    # -- libraries: torchmetrics --------------------------------------------------------
    Case(
        id="torchmetrics-metric-left-on-cpu",
        url="https://github.com/Lightning-AI/torchmetrics/issues/1047",
        classes=(7,),
        setup="""
        from torchmetrics import MeanSquaredError
        mse = MeanSquaredError()
        preds = torch.rand(3, 8, 8, device='cuda')
        target = preds * 0.75
        """,
        cell="score = mse(preds, target)\n",
        culprit="mse",  # a Metric's .to() moves its states: moved whole
        fix_has="mse.to(",
        checks=("score",),
        needs=("torchmetrics",),
    ),
    Case(
        id="torchmetrics-metrics-in-a-dict",
        url="https://github.com/Lightning-AI/torchmetrics/issues/608",
        classes=(1, 7),
        setup="""
        from torchmetrics import MeanAbsoluteError, MeanSquaredError
        metrics = {'mse': MeanSquaredError(), 'mae': MeanAbsoluteError()}
        model = nn.Linear(4, 1).to('cuda')
        x = torch.randn(6, 4, device='cuda')
        y = torch.randn(6, 1, device='cuda')
        """,
        cell="""
        pred = model(x)
        scores = {name: m(pred, y) for name, m in metrics.items()}
        mse = scores['mse']
        """,
        culprit="metrics['mse']",
        checks=("scores['mse']", "scores['mae']"),
        needs=("torchmetrics",),
    ),
    # -- libraries: torch_geometric (tensors in a private store) -------------------------
    Case(
        id="pyg-data-left-on-cpu",
        url="https://github.com/snap-stanford/ogb/issues/68",
        classes=(1,),
        setup=GCN
        + """
        model = GCN(3, 8, 2).to('cuda')
        """,
        cell="out = model(data.x, data.edge_index)\n",
        culprit="data.x",
        checks=("out",),
        needs=("torch_geometric",),
    ),
    Case(
        id="pyg-graph-passed-whole-to-forward",
        url="https://github.com/pyg-team/pytorch_geometric/issues/5028",
        classes=(1, 2, 7),
        setup=GCN
        + """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.gcn = GCN(3, 8, 2)

            def forward(self, graph):
                return self.gcn(graph.x, graph.edge_index).log_softmax(-1)

        net = Net().to('cuda')
        """,
        cell="logp = net(data)\nloss = F.nll_loss(logp, data.y)\n",
        culprit="data.x",
        checks=("logp", "loss"),
        needs=("torch_geometric",),
    ),
    # -- libraries: sentence-transformers -----------------------------------------------
    Case(
        id="sbert-query-on-cpu-corpus-on-gpu",
        url="https://github.com/huggingface/sentence-transformers/issues/852",
        classes=(2,),
        setup=SBERT
        + """
        corpus_embeddings = torch.randn(2, 16, device='cuda')  # computed earlier on the GPU
        query_embedding = sbert.encode(['the dog sat'], convert_to_tensor=True)
        """,
        cell="cos_scores = util.cos_sim(query_embedding, corpus_embeddings)[0]\n",
        culprit="query_embedding",
        checks=("cos_scores",),
        needs=("sentence_transformers",),
    ),
    # -- libraries: einops ---------------------------------------------------------------
    Case(
        id="einops-patches-plus-a-helper-table",
        url="https://github.com/tatp22/multidim-positional-encoding/pull/41",
        classes=(1,),
        setup="""
        from einops import rearrange

        class Patchify:
            def __init__(self, patch, n, d):
                self.patch = patch
                self.pos = torch.randn(n, d)

            def __call__(self, img):
                p = self.patch
                tokens = rearrange(img, 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)', p1=p, p2=p)
                return tokens + self.pos

        patchify = Patchify(2, 4, 12)
        images = torch.randn(2, 3, 4, 4, device='cuda')
        """,
        cell="tokens = patchify(images)\n",
        culprit="patchify.pos",
        checks=("tokens",),
        needs=("einops",),
    ),
    # -- libraries: lightning ------------------------------------------------------------
    Case(
        id="lightning-task-weights-as-a-plain-attribute",
        url="https://github.com/chemprop/chemprop/pull/973",
        classes=(1, 2),
        setup="""
        import lightning as L

        class Regressor(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(4, 3)
                self.task_weights = torch.tensor([1.0, 0.5, 2.0])

            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = F.mse_loss(self.net(x), y, reduction='none') * self.task_weights
                return loss.mean()

        lit = Regressor().to('cuda:0')
        batch = (torch.randn(5, 4, device='cuda'), torch.randn(5, 3, device='cuda'))
        """,
        cell="loss = lit.training_step(batch, 0)\n",
        culprit="lit.task_weights",
        checks=("loss",),
        needs=("lightning",),
    ),
    Case(
        id="lightning-target-made-in-training-step",
        url="https://github.com/Lightning-AI/pytorch-lightning/issues/2585",
        classes=(2,),
        setup="""
        import lightning as L

        class PairModel(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.enc = nn.Linear(6, 6)

            def training_step(self, batch, batch_idx):
                x1, x2 = batch['x1'], batch['x2']
                logits = self.enc(x1) @ self.enc(x2).T
                target = torch.arange(x1.size()[0])
                return F.cross_entropy(logits, target)

        pl_model = PairModel().to('cuda:0')
        batch = {'x1': torch.randn(4, 6, device='cuda'), 'x2': torch.randn(4, 6, device='cuda')}
        """,
        cell="loss = pl_model.training_step(batch, 0)\n",
        culprit="target in PairModel.training_step",
        checks=("loss",),
        needs=("lightning",),
    ),
    # -- 3. cell wrappers: %%time, %time, %%timeit, %timeit, exec, eval, run_cell ------------
    Case(
        id="time-cell-magic-unet-timesteps",
        url="https://github.com/huggingface/diffusers/issues/1600",
        classes=(3,),
        setup=UNET
        + """
        unet = unet.to('cuda')
        sample = torch.randn(2, 1, 8, 8, device='cuda')
        t = torch.tensor([10, 50])
        """,
        cell="%%time\nout = unet(sample, t).sample\n",
        culprit="t",
        checks=("out",),
        shell=True,
        needs=("diffusers",),
    ),
    Case(
        id="time-line-magic-on-a-forward",
        url="https://theneuralbase.com/pytorch/errors/runtimeerror-expected-all-tensors-on-same-device/",
        classes=(3,),
        setup="""
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to('cuda')
        features = torch.randn(32, 8)
        """,
        cell="%time out = model(features)\n",
        culprit="features",
        checks=("out",),
        shell=True,
    ),
    Case(
        id="timeit-cell-magic-sbert-similarity",
        url="https://github.com/eugeneyan/obsidian-copilot/pull/4",
        classes=(3,),
        setup=SBERT
        + """
        doc_embeddings = torch.randn(3, 16, device='cuda')
        query = sbert.encode(['a good movie'], convert_to_tensor=True)
        """,
        cell="%%timeit -n1 -r1\nscores = util.cos_sim(query, doc_embeddings)\n",
        culprit="query",
        shell=True,
        needs=("sentence_transformers",),
    ),
    Case(
        id="timeit-line-magic-before-the-real-call",
        url="https://github.com/mengqin/ComfyUI-UnetBnbModelLoader/issues/1",
        classes=(3,),
        setup="""
        net = nn.Sequential(nn.Flatten(), nn.Linear(48, 8), nn.ReLU(), nn.Linear(8, 2)).to('cuda')
        images = torch.randn(4, 3, 4, 4)
        """,
        cell="%timeit -n1 -r1 net(images)\nfeats = net(images)\n",
        culprit="images",
        checks=("feats",),
        shell=True,
    ),
    Case(
        id="exec-of-a-generated-training-line",
        url="https://runebook.dev/en/docs/pytorch/cpu",
        classes=(3,),
        setup="""
        from einops import rearrange
        head = nn.Linear(12, 5).to('cuda')
        imgs = torch.randn(2, 3, 4, 4)
        """,
        cell="exec(\"tokens = rearrange(imgs, 'b c (h p) (w q) -> b (h w) (p q c)', p=2, q=2)\\nlogits = head(tokens)\")\n",
        culprit="imgs",
        checks=("logits",),
        shell=True,
        needs=("einops",),
    ),
    Case(
        id="eval-of-a-forward-expression",
        url="https://apxml.com/courses/getting-started-with-pytorch/chapter-8-monitoring-debugging-models/checking-device-placement",
        classes=(3,),
        setup="""
        encoder = nn.Sequential(nn.Embedding(20, 8), nn.Flatten(), nn.Linear(24, 2)).to('cuda')
        token_ids = torch.randint(0, 20, (4, 3))
        """,
        cell="logits = eval('encoder(token_ids)')\n",
        culprit="token_ids",
        checks=("logits",),
        shell=True,
    ),
    Case(
        id="nested-run-cell-raises-its-error",
        url="https://github.com/ipython/ipython/pull/11833",
        classes=(3,),
        setup="""
        clf = nn.Linear(6, 2).to('cuda')
        batch = torch.randn(5, 6)
        """,
        cell="result = get_ipython().run_cell('probs = clf(batch).softmax(-1)')\nresult.raise_error()\n",
        culprit="batch",
        checks=("probs",),
        shell=True,
    ),
    # -- 4. exceptions that wrap the device error ------------------------------------------
    Case(
        id="exception-group-of-model-failures",
        url="https://github.com/modelcontextprotocol/python-sdk/pull/2245",
        classes=(4,),
        setup="""
        models = {'small': nn.Linear(4, 2).to('cuda'), 'large': nn.Linear(4, 2)}
        x = torch.randn(3, 4, device='cuda')
        """,
        cell="""
        outs, errors = {}, []
        for name, m in models.items():
            try:
                outs[name] = m(x)
            except RuntimeError as e:
                errors.append(e)
        if errors:
            raise ExceptionGroup('some models failed', errors)
        """,
        culprit="models['large']",
        checks=("outs['small']", "outs['large']"),
        needs=("python>=3.11",),
    ),
    Case(
        id="asyncio-taskgroup-embedding-requests",
        url="https://github.com/vllm-project/vllm/issues/6630",
        classes=(4,),
        setup="""
        import asyncio
        embedder = nn.Sequential(nn.Linear(8, 8), nn.Tanh()).to('cuda')
        req_a = torch.randn(2, 8, device='cuda')
        req_b = torch.randn(2, 8)

        async def embed(x):
            await asyncio.sleep(0)
            return embedder(x)

        async def serve():
            async with asyncio.TaskGroup() as tg:
                ta = tg.create_task(embed(req_a))
                tb = tg.create_task(embed(req_b))
            return ta.result(), tb.result()
        """,
        cell="emb_a, emb_b = asyncio.run(serve())\n",
        culprit="req_b",
        checks=("emb_a", "emb_b"),
        needs=("python>=3.11",),
    ),
    # Without ipydevice's worker hook the worker's objects never reach the notebook, but its
    # Dataset is a copy of `loader.dataset`: what its failing line read is named from the
    # notebook's Dataset, the target is the CPU (workers make CPU batches). A meta tensor
    # has no data to move back, so the first fix here is the cell that built the Dataset
    # without `.to(device)` (on a real GPU, the move back comes first and works as well).
    Case(
        id="dataloader-worker-normalises-with-a-moved-mean",
        url="https://github.com/RenYurui/StructureFlow/issues/40",
        classes=(4,),
        setup="""
        from torch.utils.data import Dataset

        class Normalised(Dataset):
            def __init__(self, images, mean, std):
                self.images, self.mean, self.std = images, mean, std

            def __len__(self):
                return len(self.images)

            def __getitem__(self, i):
                return (self.images[i] - self.mean) / self.std

        device = 'meta'  # the accelerator, as far as the worker is concerned
        dataset = Normalised(torch.randn(8, 3), torch.zeros(3).to(device), torch.ones(3))
        loader = DataLoader(dataset, batch_size=4, num_workers=1)
        """,
        cell="batch = next(iter(loader))\n",
        culprit="dataset.mean",
        target="cpu",
        checks=("batch",),
        fake=False,
    ),
    # -- 5. the message's own demands -------------------------------------------------------
    Case(
        id="pack-padded-lengths-moved-with-the-batch",
        url="https://github.com/bentrevett/pytorch-seq2seq/issues/156",
        classes=(5,),
        setup="""
        from torch.nn.utils.rnn import pack_padded_sequence
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
        # the whole batch is moved, as in the report
        embedded = torch.randn(3, 5, 4).to(device)
        lengths = torch.tensor([5, 3, 2]).to(device)
        """,
        cell="packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)\nsizes = packed.batch_sizes\n",
        culprit="lengths",
        target="cpu",
        checks=("sizes",),
        fake=False,
        standin=True,
    ),
    Case(
        id="pack-padded-lengths-from-the-mask-in-forward",
        url="https://github.com/sktime/pytorch-forecasting/issues/135",
        classes=(5, 2),
        setup="""
        from torch.nn.utils.rnn import pack_padded_sequence

        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(20, 4)

            def forward(self, ids, mask):
                lengths = mask.sum(1)
                return pack_padded_sequence(self.emb(ids), lengths, batch_first=True,
                                            enforce_sorted=False)

        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
        encoder = Encoder().to(device)
        ids = torch.randint(0, 20, (3, 5)).to(device)
        mask = torch.ones(3, 5, dtype=torch.long).to(device)
        """,
        cell="packed = encoder(ids, mask)\nsizes = packed.batch_sizes\n",
        culprit="lengths in Encoder.forward",
        target="cpu",
        checks=("sizes",),
        fake=False,
        standin=True,
    ),
    # -- 6. targets only among the devices the message names ------------------------------
    Case(
        id="functional-call-on-a-meta-skeleton",
        url="https://github.com/pytorch/pytorch/issues/42368",
        classes=(6,),
        setup="""
        import copy
        from torch.func import functional_call, stack_module_state

        class SimpleMLP(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(16, 8)
                self.fc2 = nn.Linear(8, 4)

            def forward(self, x):
                return self.fc2(self.fc1(x).relu())

        models = [SimpleMLP().to('cuda') for _ in range(3)]
        params, buffers = stack_module_state(models)
        base = copy.deepcopy(models[0]).to('meta')
        minibatch = torch.randn(5, 16)

        def fmodel(p, b, x):
            return functional_call(base, (p, b), (x,))
        """,
        cell="predictions = torch.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatch)\n",
        culprit="minibatch",
        checks=("predictions",),
    ),
    Case(
        id="distillation-teacher-left-on-cpu",
        url="https://github.com/JDAI-CV/fast-reid/issues/690",
        classes=(6,),
        setup="""
        teacher = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))
        student = nn.Sequential(nn.Linear(8, 4)).to('cuda')
        images = torch.randn(6, 8, device='cuda')
        """,
        cell="""
        t_logits = teacher(images)
        s_logits = student(images)
        kd = F.kl_div(s_logits.log_softmax(-1), t_logits.softmax(-1), reduction='batchmean')
        """,
        culprit="teacher",
        checks=("t_logits", "kd"),
    ),
    Case(
        id="stray-cpu-ema-and-baseline-do-not-pick-the-target",
        url="https://github.com/nlp-with-transformers/notebooks/issues/61",
        classes=(6,),
        setup="""
        import copy
        model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 2))
        ema_model = copy.deepcopy(model)            # kept on the CPU on purpose
        baseline = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 2))
        model = model.to('cuda')
        inputs = torch.randn(4, 8)
        """,
        cell="logits = model(inputs)\n",
        culprit="inputs",
        checks=("logits",),
    ),
    Case(
        id="generate-with-inputs-on-cuda-model-on-cpu",
        url="https://github.com/EfficientMoE/MoE-Infinity/issues/48",
        classes=(6,),
        setup="""
        from transformers import GPT2Config, GPT2LMHeadModel
        from tinylib import quiet_transformers, tiny_tokenizer
        quiet_transformers()
        tokenizer = tiny_tokenizer()
        config = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=32, n_positions=32,
                            bos_token_id=2, eos_token_id=3, pad_token_id=0)
        model = GPT2LMHeadModel(config)
        # 'openreg' is the stand-in device (standin.py) for the report's GPU: generate()
        # reads tensor values before the model runs, which fake CUDA cannot give
        input_ids = tokenizer(['the cat sat'], return_tensors='pt')['input_ids'].to('openreg')
        """,
        # generate() warns "`input_ids` is on openreg, whereas the model is on cpu". In
        # the report it then failed in the embedding; since huggingface/transformers#46590
        # it moves each forward's inputs to the model itself and the cell runs, with the
        # generation loop's work (and `out`) on the input's device: the warning is what
        # the user gets, its demand decides (target cpu, the model's device), and the fix
        # must make the cell run without it, `out` on cpu
        cell="out = model.generate(input_ids, max_new_tokens=2, do_sample=False)\n",
        culprit="input_ids",
        target="cpu",
        checks=("out",),
        shell=True,
        warns=True,
        fake=False,
        standin=True,
    ),
    # -- 7. owners over aliases ---------------------------------------------------------------
    Case(
        id="ema-update-zips-two-models-parameters",
        url="https://github.com/lucidrains/DALLE2-pytorch/issues/87",
        classes=(7,),
        setup="""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = nn.Linear(4, 8)
                self.fc2 = nn.Linear(8, 2)

        model = Net().to('cuda')
        ema_model = Net()
        decay = 0.99
        """,
        cell="""
        for p, ema_p in zip(model.parameters(), ema_model.parameters()):
            ema_p.mul_(decay).add_(p, alpha=1 - decay)
        w = ema_model.fc1.weight
        """,
        culprit="ema_model",
        checks=("w", "ema_model.fc2.bias"),
    ),
    Case(
        id="local-bound-to-a-cls-token-parameter",
        url="https://github.com/labmlai/annotated_deep_learning_paper_implementations/pull/221",
        classes=(7,),
        setup="""
        from einops import repeat

        class TinyViT(nn.Module):
            def __init__(self, d=12):
                super().__init__()
                self.cls_token = nn.Parameter(torch.randn(1, 1, d))
                self.proj = nn.Linear(d, d)

        vit = TinyViT()
        patches = torch.randn(2, 4, 12, device='cuda')
        """,
        cell="""
        cls = vit.cls_token
        cls_tokens = repeat(cls, '1 1 d -> b 1 d', b=patches.shape[0])
        seq = vit.proj(torch.cat([cls_tokens, patches], dim=1))
        """,
        culprit="vit",  # the owner: its proj is on cpu too, and vit.to() moves both
        checks=("seq",),
        needs=("einops",),
    ),
    Case(
        id="loop-variable-over-a-list-of-heads",
        url="https://github.com/Lightning-AI/pytorch-lightning/issues/17851",
        classes=(7,),
        setup="""
        backbone = nn.Linear(6, 6).to('cuda')
        heads = [nn.Linear(6, 2).to('cuda'), nn.Linear(6, 3)]
        x = torch.randn(4, 6, device='cuda')
        """,
        cell="""
        h = backbone(x)
        outs = []
        for head in heads:
            outs.append(head(h))
        """,
        culprit="heads[1]",
        checks=("outs[0]", "outs[1]"),
    ),
    # -- 8. torch.compile ---------------------------------------------------------------------
    Case(
        id="compiled-function-reads-cpu-globals",
        url="https://github.com/pytorch/pytorch/issues/175953",
        classes=(8,),
        setup="""
        gamma = torch.ones(16)
        beta = torch.zeros(16)

        @torch.compile(backend='eager')
        def scale_shift(x):
            return x * gamma + beta

        h = torch.randn(4, 16, device='cuda')
        """,
        cell="y = scale_shift(h)\n",
        culprit="gamma",
        checks=("y",),
    ),
    Case(
        id="compiled-closure-over-normalisation-stats",
        url="https://github.com/pytorch/pytorch/issues/166626",
        classes=(8, 2),
        setup="""
        def make_normalizer(mean, std):
            @torch.compile(backend='eager')
            def normalize(x):
                return (x - mean) / std
            return normalize

        mean = torch.tensor([0.5, 0.4, 0.3])
        std = torch.tensor([0.2, 0.2, 0.2])
        normalize = make_normalizer(mean, std)
        pixels = torch.rand(8, 3, device='cuda')
        """,
        cell="z = normalize(pixels)\n",
        culprit="mean",
        checks=("z",),
    ),
    Case(
        id="compiled-module-with-a-plain-tensor-attribute",
        url="https://github.com/pytorch/pytorch/issues/159133",
        classes=(8, 1),
        setup="""
        class Scaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)
                self.scale = torch.full((8,), 0.5)

            def forward(self, x):
                return self.fc(x) * self.scale

        model = Scaled().to('cuda')
        cmodel = torch.compile(model, backend='eager')
        x = torch.randn(2, 8, device='cuda')
        """,
        cell="out = cmodel(x)\n",
        culprit="model.scale",
        checks=("out",),
    ),
    # -- 9. fixes right in substance ------------------------------------------------------------
    Case(
        id="frozen-dataclass-batch",
        url="https://github.com/Lightning-AI/pytorch-lightning/issues/10873",
        classes=(9, 1),
        setup="""
        import dataclasses

        @dataclasses.dataclass(frozen=True)
        class Batch:
            x: torch.Tensor
            y: torch.Tensor

        model = nn.Linear(5, 3).to('cuda')
        batch = Batch(torch.randn(4, 5), torch.randint(0, 3, (4,), device='cuda'))
        """,
        cell="logits = model(batch.x)\nloss = F.cross_entropy(logits, batch.y)\n",
        culprit="batch.x",
        checks=("logits", "loss"),
    ),
    Case(
        id="sample-tuple-from-a-dataset",
        url="https://github.com/vimalabs/VIMA/issues/2",
        classes=(9, 1),
        setup="""
        ds = TensorDataset(torch.randn(10, 6), torch.randint(0, 2, (10,)))
        model = nn.Linear(6, 2).to('cuda')
        sample = ds[0]
        """,
        cell="pred = model(sample[0])\n",
        culprit="sample[0]",
        checks=("pred",),
    ),
    Case(
        id="meta-model-gets-load-state-dict-assign",
        url="https://github.com/pytorch/pytorch/pull/102212",
        classes=(9,),
        setup="""
        def build():
            return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

        state_dict = build().state_dict()   # the checkpoint, on the CPU
        with torch.device('meta'):
            model = build()
        x = torch.randn(3, 4)
        """,
        cell="out = model(x)\n",
        culprit="model",
        target="cpu",
        checks=("out",),
        fix_has="assign=True",
        fake=False,
    ),
    Case(
        id="script-style-loop-inside-a-function",
        url="https://github.com/HoyTta0/KnowledgeDistillation/issues/10",
        classes=(9,),
        setup="""
        device = torch.device('cuda')
        model = nn.Linear(4, 3).to(device)
        loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 3, (8,))), batch_size=4)

        def train_epoch():
            total = 0.0
            for xb, yb in loader:
                out = model(xb)
                total = total + F.cross_entropy(out, yb)
            return total
        """,
        cell="total = train_epoch()\n",
        culprit="xb in train_epoch",
        checks=("total",),
        fix_has="xb.to(device)",
    ),
    # -- 1. holders the walk does not enter ----------------------------------------------------
    Case(
        id="slotted-sampler-with-a-diffusers-schedule",
        url="https://github.com/huggingface/diffusers/issues/3089",
        classes=(1, 2),
        setup="""
        from diffusers import DDPMScheduler

        class Sampler:
            __slots__ = ('alphas_cumprod', 'steps')

            def __init__(self, betas):
                self.alphas_cumprod = torch.cumprod(1 - betas, 0)
                self.steps = len(betas)

            def q_sample(self, x0, t, noise):
                a = self.alphas_cumprod[t].view(-1, 1, 1, 1)
                return a.sqrt() * x0 + (1 - a).sqrt() * noise

        sampler = Sampler(DDPMScheduler(num_train_timesteps=100).betas)
        x0 = torch.randn(2, 1, 8, 8, device='cuda')
        t = torch.randint(0, 100, (2,), device='cuda')
        noise = torch.randn_like(x0)
        """,
        cell="xt = sampler.q_sample(x0, t, noise)\n",
        culprit="sampler.alphas_cumprod",
        checks=("xt",),
        needs=("diffusers",),
    ),
    Case(
        id="attrs-normaliser-constants",
        url="https://github.com/ogchen/nanofold/pull/4",
        classes=(1, 2),
        setup="""
        import attrs

        @attrs.define
        class Normalizer:
            mean: torch.Tensor
            std: torch.Tensor

            def __call__(self, x):
                return (x - self.mean) / self.std

        norm = Normalizer(torch.tensor([0.5, 0.4, 0.3]), torch.tensor([0.2, 0.2, 0.2]))
        model = nn.Linear(3, 2).to('cuda')
        pixels = torch.rand(6, 3, device='cuda')
        """,
        cell="out = model(norm(pixels))\n",
        culprit="norm.mean",
        checks=("out",),
    ),
    Case(
        id="pydantic-loss-config-class-weights",
        url="https://github.com/MoonshotAI/checkpoint-engine/pull/24",
        classes=(1, 2),
        setup="""
        from pydantic import BaseModel, ConfigDict

        class LossConfig(BaseModel):
            model_config = ConfigDict(arbitrary_types_allowed=True)
            class_weights: torch.Tensor
            label_smoothing: float = 0.0

        def compute_loss(logits, labels, cfg):
            return F.cross_entropy(logits, labels, weight=cfg.class_weights,
                                   label_smoothing=cfg.label_smoothing)

        cfg = LossConfig(class_weights=torch.tensor([1.0, 3.0]), label_smoothing=0.1)
        logits = torch.randn(8, 2, device='cuda')
        labels = torch.randint(0, 2, (8,), device='cuda')
        """,
        cell="loss = compute_loss(logits, labels, cfg)\n",
        culprit="cfg.class_weights",
        checks=("loss",),
    ),
    Case(
        id="closure-over-denormalisation-stats",
        url="https://github.com/IBM/simulai/pull/182",
        classes=(1,),
        setup="""
        def make_denorm(mean, std):
            def denorm(x):
                return x * std + mean
            return denorm

        denorm = make_denorm(torch.tensor([0.5, 0.4, 0.3]), torch.tensor([0.2, 0.2, 0.2]))
        decoder = nn.Linear(8, 3).to('cuda')
        z = torch.randn(4, 8, device='cuda')
        """,
        cell="rgb = denorm(decoder(z))\n",
        # (named `denorm.__closure__[1].cell_contents` until the fifth corpus's authors
        # asked for a closure's cell as the function reads it; the fix sets that path)
        culprit="std in denorm",
        checks=("rgb",),
    ),
    Case(
        id="tuple-of-stats-inside-a-dict",
        url="https://github.com/bentrevett/pytorch-pos-tagging/pull/5",
        classes=(1, 2, 9),
        setup="""
        stats = {
            'image': (torch.tensor([0.48, 0.45, 0.40]), torch.tensor([0.27, 0.26, 0.27])),
            'depth': (torch.tensor([2.0]), torch.tensor([1.5])),
        }

        def normalize(x, key):
            mean, std = stats[key]
            return (x - mean) / std

        pixels = torch.rand(4, 3, device='cuda')
        """,
        cell="x = normalize(pixels, 'image')\n",
        culprit="stats['image'][0]",
        checks=("x",),
    ),
    Case(
        id="prun-cell-magic-profiles-a-forward",
        url="https://github.com/sksq96/pytorch-summary/pull/107",
        classes=(3,),
        setup="""
        model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1)).to('cuda')
        x = torch.randn(16, 10)
        """,
        cell="%%prun -q\ny = model(x)\n",
        culprit="x",
        checks=("y",),
        shell=True,
    ),
    Case(
        id="diffusers-vae-decode-of-cpu-latents",
        url="https://github.com/vladmandic/sdnext/issues/2154",
        classes=(2,),
        setup="""
        from diffusers import AutoencoderKL
        vae = AutoencoderKL(in_channels=1, out_channels=1, latent_channels=2, norm_num_groups=4,
                            block_out_channels=(8,), down_block_types=('DownEncoderBlock2D',),
                            up_block_types=('UpDecoderBlock2D',)).to('cuda')
        latents = torch.randn(1, 2, 8, 8)
        """,
        cell="image = vae.decode(latents / vae.config.scaling_factor).sample\n",
        culprit="latents",
        checks=("image",),
        needs=("diffusers",),
    ),
    # -- other errors: the panel stays quiet -------------------------------------------------
    Case(
        id="quiet-einops-patch-size-does-not-divide",
        url="https://github.com/yolain/ComfyUI-Easy-Use/issues/527",
        classes=(0,),
        setup="""
        from einops import rearrange
        latents = torch.randn(1, 4, 6, 7, device='cuda')
        """,
        cell="tokens = rearrange(latents, 'b c (h ph) (w pw) -> b (h w) (c ph pw)', ph=2, pw=2)\n",
        quiet=True,
        needs=("einops",),
    ),
    Case(
        id="quiet-pyg-feature-size-mismatch",
        url="https://github.com/pyg-team/pytorch_geometric/issues/9479",
        classes=(0,),
        setup=GCN
        + """
        model = GCN(5, 8, 2).to('cuda')
        data = data.to('cuda')
        """,
        cell="out = model(data.x, data.edge_index)\n",
        quiet=True,
        needs=("torch_geometric",),
    ),
    Case(
        id="quiet-torchmetrics-accuracy-without-num-classes",
        url="https://github.com/Lightning-AI/torchmetrics/issues/917",
        classes=(0,),
        setup="from torchmetrics import Accuracy\n",
        cell="acc = Accuracy(task='multiclass')\n",
        quiet=True,
        fake=False,
        needs=("torchmetrics",),
    ),
    Case(
        id="quiet-diffusers-unet-channel-mismatch",
        url="https://github.com/huggingface/diffusers/issues/6501",
        classes=(0,),
        setup=UNET
        + """
        rgb = torch.randn(2, 3, 8, 8)
        t = torch.tensor([10, 20])
        """,
        cell="pred = unet(rgb, t).sample\n",
        quiet=True,
        fake=False,
        needs=("diffusers",),
    ),
    Case(
        id="quiet-lightning-cuda-accelerator-unavailable",
        url="https://github.com/JonasSchult/Mask3D/issues/164",
        classes=(0,),
        setup="import lightning as L\n",
        cell="trainer = L.Trainer(accelerator='cuda', devices=1, logger=False)\n",
        quiet=True,
        fake=False,
        needs=("lightning",),
    ),
    Case(
        id="quiet-sbert-semantic-search-without-corpus",
        url="https://github.com/huggingface/sentence-transformers/issues/2326",
        classes=(0,),
        setup=SBERT
        + """
        query_embedding = sbert.encode(['the cat sat'], convert_to_tensor=True)
        corpus_embeddings = None  # the corpus was never encoded
        """,
        cell="hits = util.semantic_search(query_embedding, corpus_embeddings, top_k=2)\n",
        quiet=True,
        fake=False,
        needs=("sentence_transformers",),
    ),
]
